package xds

import (
	"errors"
	"math"
	"net"
	"sync"
)

// Limits bound what clients may open on the xDS server, so that no client
// can exhaust it for the others.
type Limits struct {
	// MaxConnections bounds the server's connections. A connection beyond
	// it is closed as soon as it is accepted: its client retries, with
	// backoff, as a proxy does on any lost connection.
	MaxConnections int
	// MaxStreamsPerConnection bounds the concurrent streams of one
	// connection (HTTP/2's SETTINGS_MAX_CONCURRENT_STREAMS). Envoy opens one
	// ADS stream per connection.
	MaxStreamsPerConnection int
}

// DefaultLimits are the server's limits unless set otherwise: room for
// thousands of proxies per replica, a few streams each.
var DefaultLimits = Limits{MaxConnections: 10000, MaxStreamsPerConnection: 100}

// Check reports limits that allow nothing.
func (l Limits) Check() error {
	var errs []error
	if l.MaxConnections < 1 {
		errs = append(errs, errors.New("the connection limit must be at least 1"))
	}
	if l.MaxStreamsPerConnection < 1 || l.MaxStreamsPerConnection > math.MaxUint32 {
		errs = append(errs, errors.New("the stream limit per connection must be at least 1, and fit HTTP/2's 32 bits"))
	}
	return errors.Join(errs...)
}

// SetLimits sets the server's limits; call it before Start.
func (s *Server) SetLimits(l Limits) error {
	if err := l.Check(); err != nil {
		return err
	}
	s.limits = l
	return nil
}

// limitConnections returns a listener that holds at most max connections
// open: one accepted beyond that is closed at once, and counted.
func limitConnections(l net.Listener, max int) net.Listener {
	return &connLimiter{Listener: l, slots: make(chan struct{}, max)}
}

type connLimiter struct {
	net.Listener
	slots chan struct{} // one element per open connection
}

// Accept returns the next connection there is room for.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.slots <- struct{}{}:
			return &limitedConn{Conn: c, release: func() { <-l.slots }}, nil
		default:
			metricRefused.WithLabelValues(refusedConnection).Inc()
			_ = c.Close()
		}
	}
}

// limitedConn gives its slot back when it is closed, once.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
