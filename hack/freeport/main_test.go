package main

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

func TestPickDistinct(t *testing.T) {
	// A range of 5 ports asked for 5: each must be picked once, whatever the
	// random order, or the helper has handed out a port twice.
	low := freeRange(t, 5)
	ports, err := pick(5, low, low+5, 10000)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if seen[p] {
			t.Fatalf("port %d picked twice: %v", p, ports)
		}
		seen[p] = true
	}
}

func TestPickSkipsABoundPortThatDoesNotListen(t *testing.T) {
	low := freeRange(t, 2)
	// A socket bound to low but not listening refuses connections, so a
	// connect probe would call it free; binding it fails.
	boundNotListening(t, low)
	ports, err := pick(1, low, low+2, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if ports[0] != low+1 {
		t.Fatalf("picked %d, want %d (%d is bound)", ports[0], low+1, low)
	}
	if _, err := pick(2, low, low+2, 1000); err == nil {
		t.Fatal("picked 2 ports of a range of 2 where one is bound")
	}
}

// freeRange returns the start of n consecutive ports that are free now.
func freeRange(t *testing.T, n int) int {
	t.Helper()
	for low := 21000; low < 30000; low += n {
		ok := true
		for p := low; p < low+n && ok; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			if err != nil {
				ok = false
				continue
			}
			l.Close()
		}
		if ok {
			return low
		}
	}
	t.Fatalf("no %d consecutive free ports", n)
	return 0
}

// boundNotListening binds a TCP socket to 127.0.0.1:port without listening,
// for the test's duration.
func boundNotListening(t *testing.T, port int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	// Nothing accepts on it: a connect probe is refused.
	if c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port)); err == nil {
		c.Close()
		t.Fatal("a bound socket that does not listen accepted a connection")
	}
}
