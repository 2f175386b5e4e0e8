// Package fuzzin hands out a fuzz input a byte at a time, for the fuzz
// tests that build their inputs (files, topologies) out of it: past the
// input's end every byte is 0, so any input decodes to something whole.
package fuzzin

// Bytes is what is left of a fuzz input.
type Bytes struct{ b []byte }

// New hands out in.
func New(in []byte) *Bytes { return &Bytes{in} }

// Next is the next byte (0 past the end).
func (f *Bytes) Next() byte {
	if len(f.b) == 0 {
		return 0
	}
	c := f.b[0]
	f.b = f.b[1:]
	return c
}

// Take is the next n bytes, or as many as are left.
func (f *Bytes) Take(n int) []byte {
	n = min(n, len(f.b))
	s := f.b[:n]
	f.b = f.b[n:]
	return s
}

// Len is how many bytes are left.
func (f *Bytes) Len() int { return len(f.b) }
