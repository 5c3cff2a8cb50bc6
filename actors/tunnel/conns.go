package tunnel

import "sync"

// connSet is the set of live connections of one server or client
// incarnation, so stopping it can tear them all down. Once closed it
// refuses new members.
type connSet struct {
	mu     sync.Mutex // guards the fields below
	m      map[*func()]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{m: map[*func()]struct{}{}} }

// add registers abort, called if the set is closed while the connection
// lives. It reports false (and registers nothing) once the set is
// closed; remove must be called when the connection ends.
func (s *connSet) add(abort func()) (remove func(), ok bool) {
	p := &abort
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false
	}
	s.m[p] = struct{}{}
	return func() {
		s.mu.Lock()
		delete(s.m, p)
		s.mu.Unlock()
	}, true
}

// closeAll closes the set and aborts every connection in it.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	m := s.m
	s.m = map[*func()]struct{}{}
	s.mu.Unlock()
	for p := range m {
		(*p)()
	}
}
