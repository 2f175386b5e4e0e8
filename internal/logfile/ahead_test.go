package logfile

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// manyFrames is a ZSTD_TSC file of n (at least 30) frames of 40 records: frame 7 is
// left out (positions missing), frames 12 and 20 are the SIGTERM
// flusher's, overlapping the frames before and after them and with holes
// (TSC 0), and frame 25 overlaps frame 24 in the normal course.
func manyFrames(n int) []byte {
	h := testHeader(Version)
	h.Format, h.FormatID = "ZSTD_TSC", int32(ZstdTSC)
	frames := [][]byte{AppendStatusFrame(nil, Status{Seq: 1, Accepted: uint64(40 * n), Written: uint64(40 * n), State: StateClosed})}
	frame := func(first, n int, flags uint16, salt uint64) {
		var raw []byte
		for i := 0; i < n; i++ {
			pos := uint64(first + i)
			tsc := 1_000_000 + 29*pos + salt
			if flags&FlagSignal != 0 && i%5 == 0 {
				tsc = 0 // a hole the flusher found
			}
			raw = binary.LittleEndian.AppendUint64(raw, pos*3)
			raw = binary.LittleEndian.AppendUint64(raw, tsc)
		}
		cols := EncodeColumns(nil, raw, n, 16)
		frames = append(frames, AppendFrame(nil, FrameHeader{Kind: KindRecords, Codec: CodecZstd, Flags: flags, N: uint32(n),
			FirstPos: uint64(first), RawLen: uint32(len(cols))}, Compress(nil, cols, CodecZstd)))
	}
	for f := 0; f < n; f++ {
		switch f {
		case 7:
		case 12, 20:
			frame(f*40-10, 60, FlagSignal, 1)
		case 25:
			frame(f*40-15, 55, 0, 2)
		default:
			frame(f*40, 40, 0, 0)
		}
	}
	frames = append(frames, trailerFrame(uint64(40*n)))
	return fileBytes(h, frames...)
}

// readBatches reads p with RecordBatches, with tokens for loading frames
// ahead (nil: none): the records, the summary and the error, in words.
func readBatches(t *testing.T, p string, tokens chan struct{}) string {
	t.Helper()
	lf, err := Open(p)
	if err != nil {
		return "open: " + err.Error()
	}
	defer lf.Close()
	lf.LoadAhead(tokens)
	var got []Record
	err = lf.RecordBatches(func(rs []Record) error { got = append(got, rs...); return nil })
	sum := lf.Summary
	st, tr := fmt.Sprintf("%+v", sum.Status), fmt.Sprintf("%+v", sum.Trailer) // by value
	if sum.Status != nil {
		st = fmt.Sprintf("%+v", *sum.Status)
	}
	if sum.Trailer != nil {
		tr = fmt.Sprintf("%+v", *sum.Trailer)
	}
	sum.Status, sum.Trailer = nil, nil
	return fmt.Sprintf("records %v\nsummary %+v status %s trailer %s\nerror %v", got, sum, st, tr, err)
}

// Frames loaded ahead give what one goroutine reading in order gives: the
// same records in the same order, the same summary (frames, holes,
// duplicates, missing positions, damage) and the same error, on a file
// with overlaps, holes and a gap, and on every copy of it with one byte
// flipped; with one token to spare, and with more than the window.
func TestLoadAheadSameAsInOrder(t *testing.T) {
	b := manyFrames(30)
	dir := t.TempDir()
	p := filepath.Join(dir, "f.cplog")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	whole := readBatches(t, p, nil)
	// What the file was made to have: holes, duplicates, missing positions.
	for _, want := range []string{"Holes:16 ", "Duplicates:", "MissingPos:40 ", "Frames:29 ", "SignalFrames:2 ", "accepted records are not in the file"} {
		require.Contains(t, whole, want)
	}
	for _, n := range []int{1, 3, 16} {
		require.Equal(t, whole, readBatches(t, p, make(chan struct{}, n)), "%d tokens", n)
	}
	tokens := make(chan struct{}, 3)
	tokens <- struct{}{} // the reader's own, as analyze holds it
	for i := 0; i < len(b); i += 3 {
		c := append([]byte(nil), b...)
		c[i] ^= 0xff
		require.NoError(t, os.WriteFile(p, c, 0o644))
		require.Equal(t, readBatches(t, p, nil), readBatches(t, p, tokens), "byte %d flipped", i)
		require.Len(t, tokens, 1, "every token given back")
	}
}

// A read that ends early (fn fails) waits for the frames loading ahead
// and gives their tokens back.
func TestLoadAheadEndsEarly(t *testing.T) {
	p := writeBytes(t, manyFrames(200)) // 8000 records: fn is called before the end
	lf, err := Open(p)
	require.NoError(t, err)
	defer lf.Close()
	tokens := make(chan struct{}, 8)
	lf.LoadAhead(tokens)
	stop := fmt.Errorf("enough")
	calls := 0
	err = lf.RecordBatches(func(rs []Record) error { calls++; return stop })
	require.ErrorIs(t, err, stop)
	require.Equal(t, 1, calls)
	require.Len(t, tokens, 0)
}
