package resource

import "sync"

// Generations remembers values by key in two generations of at most size
// entries and weight units (bytes of input, say) each: a value used in the
// older generation moves to the newer, and when the newer is full the older
// is dropped. So what is in use stays, what was used once and never again
// goes, and at most 2×size values of 2×weight units are held, however many
// or large the keys that users bring. It is safe for concurrent use.
type Generations[K comparable, V any] struct {
	size, weight int

	mu              sync.Mutex
	current, former map[K]generationEntry[V]
	currentWeight   int
}

type generationEntry[V any] struct {
	value  V
	weight int
}

// NewGenerations returns Generations of at most size entries and weight
// units each.
func NewGenerations[K comparable, V any](size, weight int) *Generations[K, V] {
	return &Generations[K, V]{size: size, weight: weight,
		current: map[K]generationEntry[V]{}, former: map[K]generationEntry[V]{}}
}

// Get returns the value remembered for k.
func (g *Generations[K, V]) Get(k K) (V, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.current[k]
	if !ok {
		if e, ok = g.former[k]; ok {
			g.putLocked(k, e)
		}
	}
	return e.value, ok
}

// Put remembers v for k, weighing weight units. A value heavier than a
// generation is not remembered.
func (g *Generations[K, V]) Put(k K, v V, weight int) {
	if weight > g.weight {
		return
	}
	g.mu.Lock()
	g.putLocked(k, generationEntry[V]{v, weight})
	g.mu.Unlock()
}

func (g *Generations[K, V]) putLocked(k K, e generationEntry[V]) {
	if len(g.current) >= g.size || g.currentWeight+e.weight > g.weight {
		g.former, g.current, g.currentWeight = g.current, map[K]generationEntry[V]{}, 0
	}
	g.current[k] = e
	g.currentWeight += e.weight
}

// Held returns how many values are held, and their weight, in both
// generations.
func (g *Generations[K, V]) Held() (values, weight int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range []map[K]generationEntry[V]{g.current, g.former} {
		for _, e := range m {
			values, weight = values+1, weight+e.weight
		}
	}
	return values, weight
}

// Heaviest returns the weight of the heaviest value held.
func (g *Generations[K, V]) Heaviest() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	most := 0
	for _, m := range []map[K]generationEntry[V]{g.current, g.former} {
		for _, e := range m {
			most = max(most, e.weight)
		}
	}
	return most
}
