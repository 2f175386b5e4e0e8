package datagen

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// readErrOK: what reading a frame may fail with: a refused frame, or a
// stream that ends (between frames or inside one).
func readErrOK(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, errMalformed) && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("unexpected error kind: %v", err)
	}
}

// FuzzReadFrame feeds bytes to what a receiver does with a connection (the
// frames, HELLO first, then BUCKETs and END through the receiver's own
// handler and accounting) and to what a sender does with the receiver's
// answer (REPORT). Nothing may panic; a refusal is a malformed frame or a
// cut stream; a HELLO that decodes encodes back to itself; and the
// accounting adds up: every id of the range up to the last seen (or up to
// what END says was sent) is received or lost.
func FuzzReadFrame(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		br := bufio.NewReader(bytes.NewReader(data))
		typ, body, err := readFrame(br, nil, senderFrames)
		if err != nil {
			readErrOK(t, err)
		} else if typ == frameHello {
			receiveStream(t, br, body)
		}

		br = bufio.NewReader(bytes.NewReader(data))
		typ, body, err = readFrame(br, nil, receiverFrames)
		if err != nil {
			readErrOK(t, err)
			return
		}
		require.EqualValues(t, frameReport, typ)
		if _, err := decodeReport(body); err != nil {
			require.ErrorIs(t, err, errMalformed)
		}
	})
}

func receiveStream(t *testing.T, br *bufio.Reader, body []byte) {
	h, err := decodeHello(body)
	if err != nil {
		require.ErrorIs(t, err, errMalformed)
		return
	}
	again := bytes.Clone(body)
	again[6], again[7] = 0, 0 // reserved: not checked, written as 0
	require.Equal(t, again, h.encode()[5:])

	r := &Receiver{} // no stand-in queue: frames are accounted for as they come
	s := &stream{acc: newAccounting(h.FirstID, h.Tuples)}
	var buf []byte
	var end *End
	for end == nil {
		var typ byte
		typ, buf, err = readFrame(br, buf, senderFrames)
		if err != nil {
			readErrOK(t, err)
			break
		}
		if end, err = r.handleFrame(&h, s, typ, buf); err != nil {
			require.ErrorIs(t, err, errMalformed)
			break
		}
	}
	sent := h.Tuples
	if end != nil {
		require.LessOrEqual(t, end.Tuples, h.Tuples)
		sent = end.Tuples
	}
	seen := s.acc.next - h.FirstID
	s.acc.finish(sent)
	var rep Report
	s.acc.report(&rep)
	require.Equal(t, max(seen, sent), rep.Received+rep.Lost, "%+v", rep)
	require.LessOrEqual(t, len(rep.Gaps), maxGaps)
}

// FuzzBucket walks arbitrary BUCKET bodies: a bucket is taken whole or
// refused whole, and one that is taken is exactly its tuples.
func FuzzBucket(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var tuples, size int
		n, err := forEachTuple(body, func(id uint64, p []byte) {
			tuples++
			size += recordHeader + len(p)
		})
		if err != nil {
			require.ErrorIs(t, err, errMalformed)
			require.Zero(t, tuples, "a refused bucket delivered tuples")
			return
		}
		require.Equal(t, n, tuples)
		require.Equal(t, len(body), 4+size)
		require.GreaterOrEqual(t, n, 1)
		require.LessOrEqual(t, n, maxBucket)
	})
}
