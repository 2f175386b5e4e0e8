package logfile

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A cut reads back as the records, periods and events written, in frames
// the reader takes (an ASCII source's cut ZSTD, the mono column kept),
// with the Cut in its header, a trailer that counts what it holds, and
// nothing but the file left behind.
func TestCutWriterReadsBack(t *testing.T) {
	dir := t.TempDir()
	src := Header{Format: "ASCII", FormatID: int32(ASCII), Handler: "IDENTITY", Name: "x", Node: "n", TSCHz: 1e9, RecordSize: 24}
	w, err := CreateCut(filepath.Join(dir, "x.cplog"), src)
	require.NoError(t, err)
	var want []Record
	for i := 0; i < 10000; i++ {
		want = append(want, Record{TupleID: int64(i) - 5000, TSC: uint64(1000 + 7*i), MonoNs: uint64(3*i + 1)})
	}
	require.NoError(t, w.Records(want[:3]))
	require.NoError(t, w.Records(want[3:]))
	cut := Cut{Source: "/logs/x.cplog.txt", FromNs: 1, ToNs: 2, Records: 20000, Problems: []string{"1 damaged lines skipped"}}
	require.NoError(t, w.Close(cut, Trailer{Reason: "sigterm", Dropped: 5, Total: 9}))

	lf, err := Open(filepath.Join(dir, "x.cplog"))
	require.NoError(t, err)
	defer lf.Close()
	require.Equal(t, "ZSTD", lf.Header.Format)
	require.Equal(t, &cut, lf.Header.Cut)
	var got []Record
	require.NoError(t, lf.Records(func(r Record) error { got = append(got, r); return nil }))
	require.Equal(t, want, got)
	require.Equal(t, uint64(10000), lf.Summary.Trailer.Positions)
	require.Equal(t, "close", lf.Summary.Trailer.Reason)
	require.Zero(t, lf.Summary.Trailer.Dropped)
	require.Equal(t, uint64(9), lf.Summary.Trailer.Total)
	require.Empty(t, lf.Summary.Problems(&lf.Header))
	left, _ := os.ReadDir(dir)
	require.Len(t, left, 1)

	// A marked channel's notes of its thread's waits stay with their records.
	wsrc := src
	wsrc.Name, wsrc.Waits = "op#1 in", "rseq"
	ww, err := CreateCut(filepath.Join(dir, "w.cplog"), wsrc)
	require.NoError(t, err)
	noted := []Record{{TupleID: 1, TSC: 10, MonoNs: 1, Waited: true}, {TupleID: 2, TSC: 20, MonoNs: 2}, {TupleID: 3, TSC: 30, MonoNs: 3, Waited: true}}
	require.NoError(t, ww.Records(noted))
	require.NoError(t, ww.Close(Cut{Source: "/logs/w.cplog"}, Trailer{}))
	wf, err := Open(filepath.Join(dir, "w.cplog"))
	require.NoError(t, err)
	defer wf.Close()
	require.Equal(t, "rseq", wf.Header.Waits)
	got = got[:0]
	require.NoError(t, wf.Records(func(r Record) error { got = append(got, r); return nil }))
	require.Equal(t, noted, got)
	require.NoError(t, os.Remove(filepath.Join(dir, "w.cplog")))

	// A counter's periods and its service-rate events.
	csrc := Header{Format: "BINARY_TSC", FormatID: int32(BinaryTSC), Handler: "SERVICERATE", Name: "r", Node: "n", TSCHz: 1e9, RecordSize: 24,
		Columns:  []string{"period_end_tsc", "count", "skipped_periods"},
		OpenSync: Sync{TSC: 10}}
	cw, err := CreateCut(filepath.Join(dir, "r.cplog"), csrc)
	require.NoError(t, err)
	periods := []CounterRecord{{TSC: 100, MonoNs: 1, Count: 4}, {TSC: 200, MonoNs: 2, Count: 6, Skipped: 1}}
	for _, p := range periods {
		require.NoError(t, cw.Counter(p))
	}
	ev := Event{Event: "service_rate", Sync: &Sync{TSC: 150}, Rate: 1234.5, PeriodNs: 1000, Samples: 3}
	require.NoError(t, cw.Event(ev))
	require.NoError(t, cw.Close(Cut{Source: "s", PeriodStartTSC: 50}, Trailer{}))
	lf2, err := Open(filepath.Join(dir, "r.cplog"))
	require.NoError(t, err)
	defer lf2.Close()
	require.Equal(t, uint64(50), lf2.Header.PeriodStart())
	var gotP []CounterRecord
	require.NoError(t, lf2.Counters(func(r CounterRecord) error { gotP = append(gotP, r); return nil }))
	require.Equal(t, periods, gotP)
	require.Equal(t, []Event{ev}, lf2.Summary.Events)
	require.Equal(t, uint64(10), (&Header{OpenSync: Sync{TSC: 10}}).PeriodStart(), "no cut: the open")
}

// A cut's frames are, byte for byte, what framing the rows of its records
// gives: EncodeColumns of each frame's rows, compressed with Compress (the
// encoding the writer builds column by column, as the records come, and
// compresses on several goroutines at once), for every codec, with and
// without a mono column, notes of waits, deltas of every size and sign,
// and batches that end anywhere in a frame.
func TestCutWriterFramesAsRows(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewSource(7))
	var recs []Record
	id, tsc := int64(-3), uint64(1<<40)
	for i := 0; i < 3000; i++ {
		switch i % 4 {
		case 0:
			id++
			tsc += uint64(rng.Intn(100))
		case 1:
			id += rng.Int63n(1<<20) - 1<<19
			tsc += uint64(rng.Int63n(1 << 16))
		case 2:
			id = rng.Int63() - 1<<62
			tsc = rng.Uint64() &^ WaitedBit
		default:
			id--
			tsc -= uint64(rng.Intn(1 << 13))
		}
		recs = append(recs, Record{TupleID: id, TSC: tsc, MonoNs: uint64(i) * uint64(rng.Intn(1<<30)), Waited: rng.Intn(3) == 0})
	}
	for _, f := range []Format{BinaryTSC, Binary, ZstdTSC, Zstd, S2TSC, S2} {
		for _, waits := range []string{"", "rseq"} {
			src := Header{Format: f.String(), FormatID: int32(f), Handler: "IDENTITY", Name: "x", Node: "n", TSCHz: 1e9,
				RecordSize: f.RecordSize(), BlockRecords: 97, Waits: waits}
			path := filepath.Join(dir, f.String()+waits+".cplog")
			w, err := CreateCut(path, src)
			require.NoError(t, err)
			for rest := recs; len(rest) > 0; {
				n := min(len(rest), 1+rng.Intn(250))
				require.NoError(t, w.Records(rest[:n]))
				rest = rest[n:]
			}
			require.NoError(t, w.Close(Cut{Source: "s"}, Trailer{}))
			// The frames, from the rows.
			var want []byte
			rs := f.RecordSize()
			for first := 0; first < len(recs); first += 97 {
				block := recs[first:min(first+97, len(recs))]
				var rows []byte
				for _, r := range block {
					t := r.TSC
					if waits != "" && r.Waited {
						t |= WaitedBit
					}
					rows = binary.LittleEndian.AppendUint64(rows, uint64(r.TupleID))
					rows = binary.LittleEndian.AppendUint64(rows, t)
					if rs == 24 {
						rows = binary.LittleEndian.AppendUint64(rows, r.MonoNs)
					}
				}
				fh := FrameHeader{Kind: KindRecords, Codec: uint8(f.Codec()), N: uint32(len(block)), FirstPos: uint64(first), RawLen: uint32(len(rows))}
				payload := rows
				if f.Codec() != CodecRaw {
					cols := EncodeColumns(nil, rows, len(block), rs)
					fh.RawLen, payload = uint32(len(cols)), Compress(nil, cols, f.Codec())
				}
				want = AppendFrame(want, fh, payload)
			}
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Contains(b, want), "%s waits %q: the frames of the rows", f, waits)
			lf, err := Open(path)
			require.NoError(t, err)
			var got []Record
			require.NoError(t, lf.Records(func(r Record) error { got = append(got, r); return nil }))
			lf.Close()
			require.Len(t, got, len(recs))
		}
	}
}
