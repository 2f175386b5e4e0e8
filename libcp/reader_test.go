package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"cloudprofiler/confserver"
	"cloudprofiler/handlers"
	"cloudprofiler/internal/logfile"

	"github.com/stretchr/testify/require"
)

type infoJSON struct {
	Path              string         `json:"path"`
	Header            logfile.Header `json:"header"`
	Counter           bool           `json:"counter"`
	RecordSize        int            `json:"record_size"`
	Columns           []string       `json:"columns"`
	MaxRecords        uint64         `json:"max_records"`
	CounterRecordSize int            `json:"counter_record_size"`
	CounterColumns    []string       `json:"counter_columns"`
	MaxCounterRecords *uint64        `json:"max_counter_records"`
}

type summaryJSON struct {
	Read           string           `json:"read"`
	Records        uint64           `json:"records"`
	Written        int64            `json:"written"`
	Holes          uint64           `json:"holes"`
	Duplicates     uint64           `json:"duplicates"`
	TruncatedBytes int64            `json:"truncated_bytes"`
	CorruptBytes   int64            `json:"corrupt_bytes"`
	CorruptFrames  int              `json:"corrupt_frames"`
	Truncated      bool             `json:"truncated"`
	Damaged        bool             `json:"damaged"`
	Trailer        *logfile.Trailer `json:"trailer"`
	Events         []logfile.Event  `json:"events"`
	Error          string           `json:"error"`
	Version        int              `json:"version"`
	Problems       []string         `json:"problems"`
}

func readerInfoOf(t *testing.T, h int64) infoJSON {
	t.Helper()
	_, n := jsonCall(true, h, 0)
	require.Greater(t, n, int64(0))
	b, n2 := jsonCall(true, h, n+1)
	require.Equal(t, n, n2)
	require.Equal(t, byte(0), b[n], "NUL-terminated when it fits")
	var info infoJSON
	require.NoError(t, json.Unmarshal(b[:n], &info))
	return info
}

func readerSummaryOf(t *testing.T, h int64) summaryJSON {
	t.Helper()
	_, n := jsonCall(false, h, 0)
	require.Greater(t, n, int64(0))
	b, _ := jsonCall(false, h, n+1)
	var s summaryJSON
	require.NoError(t, json.Unmarshal(b[:n], &s))
	require.NotNil(t, s.Events, "events is a list, never null")
	return s
}

// decodeTuples turns CP_LogRead's output back into records.
func decodeTuples(b []byte, size int) []logfile.Record {
	var out []logfile.Record
	for o := 0; o+size <= len(b); o += size {
		r := logfile.Record{TupleID: int64(binary.LittleEndian.Uint64(b[o:])), TSC: binary.LittleEndian.Uint64(b[o+8:])}
		if size == 24 {
			r.MonoNs = binary.LittleEndian.Uint64(b[o+16:])
		}
		out = append(out, r)
	}
	return out
}

func decodeCounters(b []byte, size int) []logfile.CounterRecord {
	var out []logfile.CounterRecord
	for o := 0; o+size <= len(b); o += size {
		c := logfile.CounterRecord{TSC: binary.LittleEndian.Uint64(b[o:]), Count: binary.LittleEndian.Uint64(b[o+8:]),
			Skipped: binary.LittleEndian.Uint64(b[o+16:])}
		if size == 32 {
			c.MonoNs = binary.LittleEndian.Uint64(b[o+24:])
		}
		out = append(out, c)
	}
	return out
}

// Every format round-trips: what CP_LogRead writes is what the decoder
// (and so `dump --csv`) gives, byte for byte.
func TestReaderRoundTripEveryFormat(t *testing.T) {
	for _, f := range allFormats {
		t.Run(f.String(), func(t *testing.T) {
			ch, c := open(t, "reader "+f.String(), f, handlers.BufferIdentity)
			ids := seqIDs(0, 5000)
			got, rc := logTSMany(ch, ids, int64(len(ids)))
			require.Equal(t, int64(len(ids)), got)
			require.Zero(t, rc)
			require.NoError(t, parameterize(ch, handlers.ArgDropWhenFull, 0))
			require.NoError(t, closeChannel(ch, "close"))
			want, _ := readRecords(t, c.path)

			h := logOpen(c.path)
			require.Greater(t, h, int64(0))
			info := readerInfoOf(t, h)
			require.Equal(t, f.RecordSize(), info.RecordSize)
			require.False(t, info.Counter)
			require.Equal(t, "BUFFER_IDENTITY", info.Header.Handler)
			require.Equal(t, f.String(), info.Header.Format)
			require.Equal(t, c.path, info.Path)
			require.Nil(t, info.MaxCounterRecords)
			wantCols := []string{"tuple_id", "tsc"}
			if f.HasMono() {
				wantCols = append(wantCols, "mono_ns")
			}
			require.Equal(t, wantCols, info.Columns)
			require.GreaterOrEqual(t, info.MaxRecords, uint64(len(want)))
			require.LessOrEqual(t, info.MaxRecords, uint64(2*len(want)), "a useful bound")
			require.Equal(t, "none", readerSummaryOf(t, h).Read)

			b, n := logRead(h, int64(info.MaxRecords), info.RecordSize, false)
			require.Equal(t, int64(len(want)), n)
			require.Equal(t, want, decodeTuples(b, info.RecordSize))
			s := readerSummaryOf(t, h)
			require.Equal(t, "records", s.Read)
			require.Equal(t, uint64(n), s.Records)
			require.Equal(t, n, s.Written)
			require.NotNil(t, s.Trailer)
			require.Equal(t, uint64(len(ids)), s.Trailer.Positions)
			require.False(t, s.Truncated)
			require.False(t, s.Damaged)
			require.Len(t, s.Events, 1, "the drop_when_full change")

			// a second read decodes again, with the same summary; a small
			// cap writes the first records and still counts them all
			b, n = logRead(h, 10, info.RecordSize, false)
			require.Equal(t, int64(10), n)
			require.Equal(t, want[:10], decodeTuples(b, info.RecordSize))
			s2 := readerSummaryOf(t, h)
			require.Equal(t, s.Records, s2.Records)
			require.Equal(t, int64(10), s2.Written)
			require.Len(t, s2.Events, 1)
			_, n = logRead(h, 0, info.RecordSize, false)
			require.Zero(t, n)
			// no counters in a tuple file
			_, n = logRead(h, 100, 32, true)
			require.Zero(t, n)
			require.Zero(t, logClose(h))
			require.Equal(t, int32(-1), logClose(h), "second close")
		})
	}
}

func TestReaderCounters(t *testing.T) {
	for _, f := range []logfile.Format{logfile.ASCII, logfile.ASCIITSC, logfile.BinaryTSC, logfile.Binary} {
		ch, c := open(t, "reader counter", f, handlers.PeriodicCounter)
		for k := 0; k < 5; k++ {
			logTSMany(ch, seqIDs(0, 1000+k), int64(1000+k))
		}
		require.NoError(t, closeChannel(ch, "close"))
		want, _ := readCounters(t, c.path)
		require.NotEmpty(t, want)
		h := logOpen(c.path)
		require.Greater(t, h, int64(0))
		info := readerInfoOf(t, h)
		require.True(t, info.Counter)
		size := 24
		cols := []string{"period_end_tsc", "count", "skipped_periods"}
		if f.HasMono() {
			size = 32
			cols = append(cols, "mono_ns")
		}
		require.Equal(t, size, info.RecordSize, f.String())
		require.Equal(t, cols, info.Columns)
		// The file's header says the same: its columns and their size.
		require.Equal(t, cols, info.Header.Columns, f.String())
		require.Equal(t, size, info.Header.RecordSize, f.String())
		require.Equal(t, size, info.CounterRecordSize)
		require.GreaterOrEqual(t, info.MaxRecords, uint64(len(want)))
		for _, counters := range []bool{false, true} {
			b, n := logRead(h, int64(info.MaxRecords), size, counters)
			require.Equal(t, int64(len(want)), n)
			got := decodeCounters(b, size)
			if !f.HasMono() {
				for i := range want {
					want[i].MonoNs = 0
				}
			}
			require.Equal(t, want, got)
			sum := uint64(0)
			for _, r := range got {
				sum += r.Count
			}
			require.Equal(t, uint64(5*1000+10), sum)
			require.Equal(t, "counters", readerSummaryOf(t, h).Read)
		}
		require.Zero(t, logClose(h))
	}
}

// A NET_CONF file holds tuples, then counters after a switch: CP_LogRead
// returns the tuples, CP_LogReadCounters the counters.
func TestReaderNetConfTuplesAndCounters(t *testing.T) {
	startConfServer(t)
	setRule(t, confserver.Rule{ID: "rd", Name: "nc reader", Handler: "BUFFER_IDENTITY"})
	ch, c := open(t, "nc reader", logfile.ZstdTSC, handlers.NetConf)
	ids := seqIDs(0, 3000)
	got, rc := logTSMany(ch, ids, int64(len(ids)))
	require.Equal(t, int64(len(ids)), got)
	require.Zero(t, rc)
	setRule(t, confserver.Rule{ID: "rd", Name: "nc reader", Handler: "PERIODICCOUNTER", Args: []int64{10_000_000}})
	waitFor(t, c, handlers.PeriodicCounter, 5e9)
	got, rc = logTSMany(ch, ids, 777)
	require.Equal(t, int64(777), got)
	require.Zero(t, rc)
	require.NoError(t, closeChannel(ch, "close"))

	h := logOpen(c.path)
	require.Greater(t, h, int64(0))
	info := readerInfoOf(t, h)
	require.False(t, info.Counter)
	require.Equal(t, 16, info.RecordSize)
	require.Equal(t, 24, info.CounterRecordSize)
	require.NotNil(t, info.MaxCounterRecords)
	b, n := logRead(h, int64(info.MaxRecords), 16, false)
	require.Equal(t, int64(len(ids)), n)
	var gotIDs []int64
	for _, r := range decodeTuples(b, 16) {
		gotIDs = append(gotIDs, r.TupleID)
	}
	require.Equal(t, ids, gotIDs)
	b, n = logRead(h, int64(*info.MaxCounterRecords), 24, true)
	require.Greater(t, n, int64(0))
	sum := uint64(0)
	for _, r := range decodeCounters(b, 24) {
		sum += r.Count
	}
	require.Equal(t, uint64(777), sum)
	require.Zero(t, logClose(h))
}

// A file cut short returns its whole frames; a damaged frame is skipped and
// the rest returned; the summary says what was lost. Where the drainer cut
// frames depends on timing (a partial block is written when the channel goes
// quiet), so the assertions hold for any frame layout of at most one block
// (1024 records) per frame, and damage is tried at many offsets.
func TestReaderTruncatedAndDamaged(t *testing.T) {
	ch, c := open(t, "reader cut", logfile.ZstdTSC, handlers.BufferIdentity)
	const total = 30_000 // ~30 frames of 1024
	got, _ := logTSMany(ch, seqIDs(0, total), total)
	require.Equal(t, int64(total), got)
	require.NoError(t, closeChannel(ch, "close"))
	data, err := os.ReadFile(c.path)
	require.NoError(t, err)
	all := seqIDs(0, total)
	dir := t.TempDir()

	// readBack reads a file through the C ABI and checks what any reader
	// must: records only as logged, in order, and damage or loss said.
	readBack := func(what string, b []byte) ([]int64, summaryJSON) {
		p := filepath.Join(dir, "f.cplog")
		require.NoError(t, os.WriteFile(p, b, 0o644))
		h := logOpen(p)
		require.Greater(t, h, int64(0), what)
		info := readerInfoOf(t, h)
		out, n := logRead(h, int64(info.MaxRecords), 16, false)
		require.GreaterOrEqual(t, n, int64(0), what)
		require.LessOrEqual(t, uint64(n), info.MaxRecords, what)
		var ids []int64
		for _, r := range decodeTuples(out, 16) {
			ids = append(ids, r.TupleID)
		}
		k := 0
		for _, id := range ids {
			for k < total && all[k] != id {
				k++
			}
			require.Less(t, k, total, "%s: id %d never logged or out of order", what, id)
			k++
		}
		s := readerSummaryOf(t, h)
		require.Equal(t, uint64(n), s.Records, what)
		if n < total {
			require.NotEmpty(t, s.Problems, "%s: %d of %d records and no problem said", what, n, total)
		}
		require.Zero(t, logClose(h))
		return ids, s
	}

	ids, s := readBack("whole", data)
	require.Equal(t, all, ids)
	require.Empty(t, s.Problems)
	require.Equal(t, 2, s.Version)

	// Cuts inside a frame (the trailer's; 1 byte into the last data
	// frame), and where frames end (before the trailer, before the last
	// data frame): where the drainer cut its frames depends on when it ran,
	// so the cuts are placed by the file's own frames.
	hdrEnd := 16 + int(binary.LittleEndian.Uint32(data[12:])) + 2*logfile.StatusFrameSize
	var starts []int
	for off := hdrEnd; off+logfile.FrameHeaderSize <= len(data); {
		starts = append(starts, off)
		off += logfile.FrameHeaderSize + int(binary.LittleEndian.Uint32(data[off+12:]))
	}
	require.GreaterOrEqual(t, len(starts), 3, "frames")
	trailer, last := starts[len(starts)-1], starts[len(starts)-2]
	for _, cut := range []int{len(data) - 1, len(data) - 100, trailer, last + 1, last, last - 700} {
		what := fmt.Sprintf("cut %d bytes (the trailer at %d, the last data frame at %d)", len(data)-cut, len(data)-trailer, len(data)-last)
		ids, s := readBack(what, data[:cut])
		require.Equal(t, all[:len(ids)], ids, "%s: a prefix", what)
		require.Contains(t, strings.Join(s.Problems, "\n"), "cut short", what)
		require.True(t, s.Truncated || s.Trailer == nil, what)
		require.Nil(t, s.Trailer, "%s: the trailer was cut off", what)
		require.False(t, s.Damaged, what)
	}

	// Damage one byte at many places past the file header: at most the
	// frame holding it is lost, and the summary says it was damaged.
	for off := hdrEnd; off < len(data); off += 211 {
		what := fmt.Sprintf("byte %d flipped", off)
		d2 := append([]byte(nil), data...)
		d2[off] ^= 0xff
		ids, s := readBack(what, d2)
		require.GreaterOrEqual(t, len(ids), total-1024, what)
		if len(ids) < total {
			require.True(t, s.Damaged, what)
			require.Equal(t, 1, s.CorruptFrames, what)
		}
	}
}

func TestReaderErrors(t *testing.T) {
	runtime.LockOSThread() // CP_LastError is per thread
	defer runtime.UnlockOSThread()
	missing := filepath.Join(t.TempDir(), "nothing.cplog")
	require.Equal(t, int64(-12), logOpen(missing))
	msg, n := lastError(4096)
	require.Contains(t, msg, "no such file")
	require.Equal(t, int32(len(msg)), n)

	foreign := filepath.Join(t.TempDir(), "foreign.txt")
	require.NoError(t, os.WriteFile(foreign, []byte("hello, not a log\n"), 0o644))
	require.Equal(t, int64(-12), logOpen(foreign))
	msg, _ = lastError(4096)
	require.Contains(t, msg, "not a Cloudprofiler log")
	require.Contains(t, msg, foreign)
	require.Equal(t, int64(-3), logOpen(""))
	require.Equal(t, int64(-3), logOpen("\x00"), "NULL path")
	msg, _ = lastError(4096)
	require.Contains(t, msg, "NULL")

	ch, c := open(t, "reader errors", logfile.BinaryTSC, handlers.BufferIdentity)
	for _, bad := range []int64{0, -1, 12345, readerTag, readerTag | 1<<40, ch} {
		require.Equal(t, int32(-1), logClose(bad))
		_, n := logRead(bad, 10, 16, false)
		require.Equal(t, int64(-1), n)
		_, n = logRead(bad, 10, 16, true)
		require.Equal(t, int64(-1), n)
		_, n = jsonCall(true, bad, 100)
		require.Equal(t, int64(-1), n)
		_, n = jsonCall(false, bad, 100)
		require.Equal(t, int64(-1), n)
	}
	msg, _ = lastError(4096)
	require.Contains(t, msg, "not an open reader handle")
	require.NoError(t, closeChannel(ch, "close"))
	h := logOpen(c.path)
	require.Greater(t, h, int64(0))
	require.Equal(t, int32(-1), logTS(h, 1), "a reader handle is no channel")
	require.Equal(t, int64(-10), logReadNil(h, 5))
	_, n2 := logRead(h, -1, 16, false)
	require.Equal(t, int64(-10), n2)
	// JSON: a short buffer gets the first cap bytes, no NUL, the full length
	_, full := jsonCall(true, h, 0)
	b, got := jsonCall(true, h, 10)
	require.Equal(t, full, got)
	require.Equal(t, "x", string(b[10:]), "nothing past cap (no NUL)")
	require.True(t, strings.HasPrefix(string(b), `{"path":`))
	require.Zero(t, logClose(h))
}

func TestLastError(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, err := openChannel("", logfile.BinaryTSC, handlers.Null)
	require.Error(t, err)
	require.Equal(t, int64(-3), openNullName())
	msg, n := lastError(4096)
	require.Equal(t, "OpenChannel: the channel name is NULL", msg)
	require.Equal(t, int32(len(msg)), n)
	short, n2 := lastError(5)
	require.Equal(t, "Open", short, "truncated to cap-1 and NUL-terminated")
	require.Equal(t, n, n2, "full length")
	_, n3 := lastError(0)
	require.Equal(t, n, n3)

	ch, _ := open(t, "last error", logfile.BinaryTSC, handlers.BufferIdentity)
	require.Equal(t, int32(-9), parameterizeC(ch, 0, 5))
	msg, _ = lastError(4096)
	require.NotEmpty(t, msg)
	require.NotEqual(t, "OpenChannel: the channel name is NULL", msg)
	require.Zero(t, closeChannelC(ch))
	msg2, _ := lastError(4096)
	require.Equal(t, msg, msg2, "a success keeps the last failure")
	require.Equal(t, int32(-2), closeChannelC(ch))
	msg, _ = lastError(4096)
	require.Contains(t, msg, "closed")
}
