package critpath

import (
	"sync"
)

// Kind is what a part of a latency, or a category of a critical path, is.
type Kind uint8

const (
	KindCompute      Kind = iota // an operator's own work on the tuple (in..out)
	KindQueue                    // waiting behind earlier tuples at an operator, or blocked handing the tuple to it
	KindTransfer                 // a link: from a hand-off to the next record in another process, or to an in when the receiver was free
	KindOther                    // between records the marks do not explain (unmarked records in one process)
	KindInput                    // critical path only: waiting for input
	KindUnattributed             // critical path only: what the records could not follow
)

var kindNames = [...]string{"compute", "queue", "transfer", "other", "input", "unattributed"}

func (k Kind) String() string { return kindNames[k] }

// Part is one entry of the registry: a kind and where (an operator's name,
// or a link "FROM -> TO").
type Part struct {
	Kind  Kind
	Where string
}

// registry numbers the parts; links are found while tuples are read, by
// every worker at once.
type registry struct {
	mu    sync.Mutex
	parts []Part
	index map[Part]uint16
}

func (r *registry) id(p Part) uint16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if i, ok := r.index[p]; ok {
		return i
	}
	if r.index == nil {
		r.index = map[Part]uint16{}
	}
	i := uint16(len(r.parts))
	r.parts = append(r.parts, p)
	r.index[p] = i
	return i
}

func (r *registry) snapshot() []Part {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Part(nil), r.parts...)
}

// maxParts bounds the registry: a part id is 16 bits in a Visit.
const maxParts = 1 << 15
