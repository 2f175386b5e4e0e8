package critpath

import (
	"encoding/binary"
	"errors"
	"math"
)

// A spilled run is encoded compactly, each visit against the one before
// it in the run (sorted by In): In and the hand-off as differences from the
// previous visit's (both climb), out and departure against In and Out, the
// rest as varints and only where they differ from the previous visit's; a
// visit takes about 6 to 20 bytes
// instead of 48.

// Flags of an encoded visit: what it holds, and which fields are the
// previous visit's (most are, in a run of one operator's visits).
const (
	fErr = 1 << iota
	fHandOff
	fSameInst
	fSameUp
	fSameNext
	fSameLink
	fSameBucket
	fD // the instance's previous departure, found in pass 1 (Visit.D)
)

// appendVisit encodes v after prev.
func appendVisit(b []byte, v, prev *Visit) []byte {
	flags := byte(0)
	if v.Err != 0 {
		flags |= fErr
	}
	if v.Up != noHandOff {
		flags |= fHandOff
	}
	if v.Inst == prev.Inst {
		flags |= fSameInst
	}
	if v.Up == prev.Up {
		flags |= fSameUp
	}
	if v.Next == prev.Next {
		flags |= fSameNext
	}
	if v.Link == prev.Link && v.Waits == prev.Waits {
		flags |= fSameLink
	}
	if v.Bucket == prev.Bucket {
		flags |= fSameBucket
	}
	if v.D != noD {
		flags |= fD
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, uint64(v.In-prev.In)) // sorted: >= 0
	if flags&fHandOff != 0 {
		b = binary.AppendVarint(b, v.H-prev.H) // hand-offs climb with the ins
	}
	b = binary.AppendVarint(b, v.Out-v.In)
	b = binary.AppendVarint(b, v.Dep-v.Out)
	if flags&fErr != 0 {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v.Err))
	}
	if flags&fSameInst == 0 {
		b = binary.AppendUvarint(b, uint64(v.Inst))
	}
	if flags&fSameUp == 0 {
		b = binary.AppendUvarint(b, uint64(v.Up))
	}
	if flags&fSameNext == 0 {
		b = binary.AppendUvarint(b, uint64(v.Next))
	}
	if flags&fSameLink == 0 { // the link and the notes of waits, together
		b = binary.AppendUvarint(b, uint64(v.Link)<<3|uint64(v.Waits))
	}
	if flags&fSameBucket == 0 {
		b = binary.AppendVarint(b, int64(v.Bucket))
	}
	if flags&fD != 0 {
		b = binary.AppendVarint(b, v.In-v.D)
	}
	return b
}

var errVisit = errors.New("a damaged visit")

// visitReader decodes a run's bytes.
type visitReader struct {
	b    []byte
	prev Visit
	bad  bool
}

func (r *visitReader) uvarint() uint64 {
	b := r.b
	if len(b) > 0 && b[0] < 0x80 {
		r.b = b[1:]
		return uint64(b[0])
	}
	if len(b) > 1 && b[1] < 0x80 {
		r.b = b[2:]
		return uint64(b[0]&0x7f) | uint64(b[1])<<7
	}
	x, n := binary.Uvarint(b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = b[n:]
	return x
}

func (r *visitReader) varint() int64 {
	ux := r.uvarint()
	x := int64(ux >> 1)
	if ux&1 != 0 {
		x = ^x
	}
	return x
}

// next decodes one visit into v; it needs the whole visit in r.b (the
// caller keeps at least maxVisitBytes there, or the run's end).
func (r *visitReader) next(v *Visit) error {
	if len(r.b) == 0 {
		return errVisit
	}
	flags := r.b[0]
	r.b = r.b[1:]
	*v = r.prev
	v.In = r.prev.In + int64(r.uvarint())
	v.H, v.Err = 0, 0
	if flags&fHandOff != 0 {
		v.H = r.prev.H + r.varint()
	}
	v.Out = v.In + r.varint()
	v.Dep = v.Out + r.varint()
	if flags&fErr != 0 {
		if len(r.b) < 4 {
			return errVisit
		}
		v.Err = math.Float32frombits(binary.LittleEndian.Uint32(r.b))
		r.b = r.b[4:]
	}
	if flags&fSameInst == 0 {
		v.Inst = uint16(r.uvarint())
	}
	if flags&fSameUp == 0 {
		v.Up = uint16(r.uvarint())
	}
	if flags&fSameNext == 0 {
		v.Next = uint16(r.uvarint())
	}
	if flags&fSameLink == 0 {
		x := r.uvarint()
		v.Link, v.Waits = uint16(x>>3), uint8(x&7)
	}
	if flags&fSameBucket == 0 {
		v.Bucket = int32(r.varint())
	}
	v.D = noD
	if flags&fD != 0 {
		v.D = v.In - r.varint()
	}
	if r.bad {
		return errVisit
	}
	r.prev = *v
	return nil
}

// maxVisitBytes bounds an encoded visit.
const maxVisitBytes = 1 + 10 + 10 + 3 + 3 + 10 + 10 + 4 + 5 + 3 + 3 + 10 // the link's 3 bytes hold the notes too (19 bits)
