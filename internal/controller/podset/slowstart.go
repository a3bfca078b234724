package podset

import "sync"

// slowStartBatch calls fn count times, in batches of 1, 2, 4, … calls that run
// in parallel. After a batch in which any call failed it stops, so that an
// error every call would hit (a quota, an admission webhook, a terminating
// namespace) costs a few requests rather than count. It returns how many calls
// succeeded and the first error.
func slowStartBatch(count, initialBatchSize int, fn func() error) (int, error) {
	remaining := count
	successes := 0
	for batch := min(remaining, initialBatchSize); batch > 0; batch = min(2*batch, remaining) {
		errs := make(chan error, batch)
		var wg sync.WaitGroup
		for range batch {
			wg.Go(func() {
				if err := fn(); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		successes += batch - len(errs)
		if len(errs) > 0 {
			return successes, <-errs
		}
		remaining -= batch
	}
	return successes, nil
}
