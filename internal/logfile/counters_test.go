package logfile

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Counter files the library wrote (testdata/counters; libcp's
// TestCounterTestdata writes them again): a PERIODICCOUNTER in BINARY_TSC,
// a FASTPERIODICCOUNTER in BINARY whose four writers logged 104000 events
// of which it counted 97692 (its trailer's total), a SERVICERATE in
// ASCII_TSC.
var libraryCounterFiles = []string{"periodic.cplog", "fast-4-writers.cplog", "servicerate.cplog.txt"}

func readCounterBytes(t *testing.T, b []byte) ([]CounterRecord, *File, error) {
	t.Helper()
	lf, err := Open(writeBytes(t, b))
	require.NoError(t, err)
	defer lf.Close()
	var recs []CounterRecord
	err = lf.Counters(func(r CounterRecord) error { recs = append(recs, r); return nil })
	return recs, lf, err
}

// frameOffsets are where a binary file's frames of kind start.
func frameOffsets(t *testing.T, b []byte, kind uint8) []int {
	t.Helper()
	var offs []int
	for off := 16 + int(binary.LittleEndian.Uint32(b[12:])); off < len(b); {
		fh, err := parseFrameHeader(b[off:])
		require.NoError(t, err)
		if fh.Kind == kind {
			offs = append(offs, off)
		}
		off += FrameHeaderSize + int(fh.StoredLen)
	}
	return offs
}

// periodLines are the line numbers of an ASCII counter file's periods.
func periodLines(lines []string) []int {
	var at []int
	for i, l := range lines {
		if l != "" && !strings.HasPrefix(l, "#") {
			at = append(at, i)
		}
	}
	return at
}

// withCount is the file b with period i's count set to n, written as the
// library writes it: the frame sealed again, or the line rewritten (ASCII
// lines carry no checksum), so that only the sum is wrong.
func withCount(t *testing.T, b []byte, ascii bool, i int, n uint64) []byte {
	t.Helper()
	b = append([]byte(nil), b...)
	if ascii {
		lines := strings.Split(string(b), "\n")
		at := periodLines(lines)[i]
		f := strings.Split(lines[at], ",")
		f[1] = strconv.FormatUint(n, 10)
		lines[at] = strings.Join(f, ",")
		return []byte(strings.Join(lines, "\n"))
	}
	off := frameOffsets(t, b, KindCounter)[i]
	binary.LittleEndian.PutUint64(b[off+FrameHeaderSize+16:], n)
	Seal(b[off : off+FrameHeaderSize+CounterRecordSize])
	return b
}

// withoutTrailer is the file b cut where its trailer begins.
func withoutTrailer(t *testing.T, b []byte, ascii bool) []byte {
	t.Helper()
	if ascii {
		at := strings.Index(string(b), "\n#trailer ")
		require.Positive(t, at)
		return b[:at+1]
	}
	offs := frameOffsets(t, b, KindTrailer)
	require.Len(t, offs, 1)
	return b[:offs[0]]
}

// The library's counter files read clean: every period, adding up to the
// trailer's total (FASTPERIODICCOUNTER's too, under the events logged).
// With one period's count changed, and nothing else (no checksum fails),
// the file is damaged, and the reader says by how much; cut before its
// trailer, there is nothing to check the periods against, and nothing
// more is said than that the trailer is missing.
func TestCounterPeriodsAddUpToTheTrailer(t *testing.T) {
	for _, name := range libraryCounterFiles {
		t.Run(name, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "counters", name))
			require.NoError(t, err)
			ascii := strings.HasSuffix(name, ".txt")
			recs, lf, err := readCounterBytes(t, b)
			require.NoError(t, err)
			require.Empty(t, lf.Summary.Problems(&lf.Header))
			require.True(t, lf.Header.Counter())
			require.GreaterOrEqual(t, len(recs), 3)
			total := lf.Summary.Trailer.Total
			var sum uint64
			for _, r := range recs {
				sum += r.Count
			}
			require.Equal(t, total, sum)
			require.Equal(t, total, lf.Summary.Counted)

			// A read its fn stopped after one period has not added them up.
			stop := errors.New("stop")
			lf4, err := Open(writeBytes(t, b))
			require.NoError(t, err)
			require.ErrorIs(t, lf4.Counters(func(CounterRecord) error { return stop }), stop)
			require.Empty(t, lf4.Summary.Problems(&lf4.Header))
			lf4.Close()

			// One period's count one higher: the frame is whole, the sum is not.
			k := len(recs) / 2
			require.Positive(t, recs[k].Count)
			changed, lf2, err := readCounterBytes(t, withCount(t, b, ascii, k, recs[k].Count+1))
			require.ErrorIs(t, err, ErrDamaged)
			msg := fmt.Sprintf("the periods add up to %d events, the trailer says %d", total+1, total)
			require.Contains(t, err.Error(), msg)
			require.Equal(t, []string{msg}, lf2.Summary.Problems(&lf2.Header), "no other damage")
			require.Zero(t, lf2.Summary.CorruptFrames+lf2.Summary.CorruptLines)
			want := append([]CounterRecord(nil), recs...)
			want[k].Count++
			require.Equal(t, want, changed, "every period read, as the file has it")

			// A count of 0: fewer events than the trailer's.
			_, _, err = readCounterBytes(t, withCount(t, b, ascii, k, 0))
			require.ErrorContains(t, err, fmt.Sprintf("the periods add up to %d events, the trailer says %d", total-recs[k].Count, total))

			// No trailer (cut by a crash after its periods): nothing to compare.
			for _, cut := range [][]byte{withoutTrailer(t, b, ascii), withoutTrailer(t, withCount(t, b, ascii, k, 0), ascii)} {
				got, lf3, err := readCounterBytes(t, cut)
				require.ErrorIs(t, err, ErrDamaged)
				require.Len(t, got, len(recs))
				require.Nil(t, lf3.Summary.Trailer)
				require.Equal(t, []string{"cut short: the channel was closed, yet the file ends after a whole frame, before its trailer"},
					lf3.Summary.Problems(&lf3.Header))
			}
		})
	}
}

// A counter whose last records the disk refused (full until the close):
// the trailer says how many of its total were never written, and the
// periods add up to the rest; that is no disagreement (the loss is said
// as such). Periods that add up to neither are.
func TestCounterPeriodsAddUpWithUnwritten(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "counters", "periodic.cplog"))
	require.NoError(t, err)
	recs, lf, err := readCounterBytes(t, b)
	require.NoError(t, err)
	tr := *lf.Summary.Trailer
	// The periods from the last one that counted anything on are refused.
	from := len(recs) - 1
	for recs[from].Count == 0 {
		from--
	}
	var lost uint64
	for _, r := range recs[from:] {
		lost += r.Count
	}
	require.Less(t, lost, tr.Total)
	offs := frameOffsets(t, b, KindCounter)
	trailerAt := frameOffsets(t, b, KindTrailer)[0]
	require.Equal(t, (len(offs)-from)*(FrameHeaderSize+CounterRecordSize), trailerAt-offs[from], "those periods' frames, then the trailer")
	refused := func(unwritten uint64) []byte {
		tr.Unwritten, tr.WriteError = unwritten, "no space left on device"
		js, err := json.Marshal(tr)
		require.NoError(t, err)
		return AppendFrame(append([]byte(nil), b[:offs[from]]...), FrameHeader{Kind: KindTrailer, RawLen: uint32(len(js))}, js)
	}
	got, lf, err := readCounterBytes(t, refused(lost))
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, recs[:from], got)
	require.Equal(t, []string{fmt.Sprintf("%d accepted records were never written (no space left on device)", lost)},
		lf.Summary.Problems(&lf.Header))

	_, lf, err = readCounterBytes(t, refused(lost-1))
	require.ErrorIs(t, err, ErrDamaged)
	require.Contains(t, lf.Summary.Problems(&lf.Header),
		fmt.Sprintf("the periods add up to %d events, the trailer says %d (%d of them never written)", tr.Total-lost, tr.Total, lost-1))
}
