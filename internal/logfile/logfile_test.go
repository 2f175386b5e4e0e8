package logfile

import (
	"encoding/binary"
	"encoding/json"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func rawRecords(n, recSize int, seed int64) []byte {
	r := rand.New(rand.NewSource(seed))
	b := make([]byte, n*recSize)
	id, tsc := r.Int63n(1<<40)-1<<39, uint64(r.Int63())
	for i := 0; i < n; i++ {
		id += r.Int63n(5) - 1
		tsc += uint64(r.Int63n(300))
		binary.LittleEndian.PutUint64(b[i*recSize:], uint64(id))
		binary.LittleEndian.PutUint64(b[i*recSize+8:], tsc)
		if recSize == 24 {
			binary.LittleEndian.PutUint64(b[i*recSize+16:], r.Uint64())
		}
	}
	return b
}

func TestColumnsRoundTrip(t *testing.T) {
	for _, recSize := range []int{16, 24} {
		for _, codec := range []int{CodecColumns, CodecZstd, CodecS2} {
			raw := rawRecords(5000, recSize, int64(recSize+codec))
			cols := EncodeColumns(nil, raw, 5000, recSize)
			packed := Compress(nil, cols, codec)
			un, err := Decompress(nil, packed, codec, len(cols))
			require.NoError(t, err)
			back, err := DecodeColumns(nil, un, 5000, recSize)
			require.NoError(t, err)
			require.Equal(t, raw, back)
			if recSize == 16 {
				ids, tscs, err := DecodeColumnPair([]int64{-1}, []uint64{7}, un, 5000)
				require.NoError(t, err)
				requirePairIsRecords(t, back, ids, tscs)
			}
		}
	}
}

// requirePairIsRecords: DecodeColumnPair appended, after the one value
// each column held, the ids and TSCs of the 16-byte records raw.
func requirePairIsRecords(t *testing.T, raw []byte, ids []int64, tscs []uint64) {
	t.Helper()
	require.Len(t, ids, 1+len(raw)/16)
	require.Len(t, tscs, 1+len(raw)/16)
	require.Equal(t, int64(-1), ids[0])
	require.Equal(t, uint64(7), tscs[0])
	for i := 0; i < len(raw)/16; i++ {
		require.Equal(t, binary.LittleEndian.Uint64(raw[i*16:]), uint64(ids[1+i]), "id %d", i)
		require.Equal(t, binary.LittleEndian.Uint64(raw[i*16+8:]), tscs[1+i], "tsc %d", i)
	}
}

// Bytes that are not a column encoding give an error from both decoders,
// never a panic, and where one decodes them the other gives the same.
func FuzzDecodeColumns(f *testing.F) {
	f.Add([]byte{1, 2, 3}, 2)
	f.Add([]byte{2, 0x80, 1, 4, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1}, 2)
	f.Fuzz(func(t *testing.T, b []byte, n int) {
		if n < 0 || n > 1000 {
			return
		}
		raw, err := DecodeColumns(nil, b, n, 16)
		ids, tscs, err2 := DecodeColumnPair([]int64{-1}, []uint64{7}, b, n)
		require.Equal(t, err == nil, err2 == nil, "%v / %v", err, err2)
		if err == nil {
			requirePairIsRecords(t, raw, ids, tscs)
		}
	})
}

// testHeader is the file header of the hand-built logs: a BUFFER_IDENTITY
// BINARY_TSC channel with blocks of 64 records in a ring of 4.
func testHeader(version int) Header {
	return Header{Version: version, ByteOrder: "little", Format: "BINARY_TSC", FormatID: int32(BinaryTSC),
		Handler: "BUFFER_IDENTITY", HandlerID: 1, RecordSize: 16, BlockRecords: 64, RingBlocks: 4}
}

// fileBytes builds a binary log by hand: the header, then the given frames.
func fileBytes(h Header, frames ...[]byte) []byte {
	js, _ := json.Marshal(h)
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint16(b, uint16(h.Version))
	b = binary.LittleEndian.AppendUint16(b, ByteOrderMark)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(js)))
	b = append(b, js...)
	for _, f := range frames {
		b = append(b, f...)
	}
	return b
}

func writeBytes(t *testing.T, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f.cplog")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// writeFile writes a version 2 log of the given frames.
func writeFile(t *testing.T, frames ...[]byte) string {
	t.Helper()
	return writeBytes(t, fileBytes(testHeader(Version), frames...))
}

// trailerFrame is the trailer of a channel closed after accepting positions.
func trailerFrame(positions uint64) []byte {
	js, _ := json.Marshal(Trailer{Reason: "test", Positions: positions})
	return AppendFrame(nil, FrameHeader{Kind: KindTrailer, RawLen: uint32(len(js))}, js)
}

func recordsFrame(first uint64, ids ...int64) []byte {
	var raw []byte
	for i, id := range ids {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(id))
		raw = binary.LittleEndian.AppendUint64(raw, uint64(1000+i))
	}
	return AppendFrame(nil, FrameHeader{Kind: KindRecords, N: uint32(len(ids)), FirstPos: first, RawLen: uint32(len(raw))}, raw)
}

func readAll(t *testing.T, p string) ([]int64, *File, error) {
	lf, err := Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer lf.Close()
	var ids []int64
	err = lf.Records(func(r Record) error { ids = append(ids, r.TupleID); return nil })
	return ids, lf, err
}

func TestFramesOrderedAndDeduplicated(t *testing.T) {
	// Block 2 arrives before block 1, and a SIGTERM flush repeats part of block 1.
	p := writeFile(t, recordsFrame(0, 0, 1), recordsFrame(4, 4, 5), recordsFrame(2, 2, 3), recordsFrame(3, 3), trailerFrame(6))
	ids, lf, err := readAll(t, p)
	require.NoError(t, err)
	require.Equal(t, []int64{0, 1, 2, 3, 4, 5}, ids)
	require.Equal(t, uint64(1), lf.Summary.Duplicates)
}

func TestTruncatedFileDecodesUpToLastWholeFrame(t *testing.T) {
	full := writeFile(t, recordsFrame(0, 0, 1), recordsFrame(2, 2, 3))
	b, _ := os.ReadFile(full)
	for cut := 1; cut < 40; cut++ {
		p := filepath.Join(t.TempDir(), "cut.cplog")
		require.NoError(t, os.WriteFile(p, b[:len(b)-cut], 0o644))
		ids, lf, err := readAll(t, p)
		require.ErrorIs(t, err, ErrDamaged) // cut short, and no trailer
		require.Equal(t, []int64{0, 1}, ids, "cut %d", cut)
		require.Equal(t, int64(32+32-cut), lf.Summary.TruncatedBytes)
		require.Contains(t, err.Error(), "cut short")
	}
}

func TestCorruptAndForeignFiles(t *testing.T) {
	p := filepath.Join(t.TempDir(), "foreign")
	require.NoError(t, os.WriteFile(p, []byte("hello, this is not a log"), 0o644))
	_, _, err := readAll(t, p)
	require.ErrorIs(t, err, ErrForeign)

	require.NoError(t, os.WriteFile(p, nil, 0o644))
	_, _, err = readAll(t, p)
	require.ErrorIs(t, err, ErrForeign)

	// Garbage between frames: skipped, everything whole decoded, damage said.
	good := recordsFrame(0, 0, 1)
	ids, lf, err := readAll(t, writeFile(t, good, []byte("garbage garbage"), recordsFrame(2, 2, 3)))
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, []int64{0, 1, 2, 3}, ids)
	require.Equal(t, int64(15), lf.Summary.CorruptBytes)

	// A frame whose payload was damaged: skipped, its positions missing.
	flip := recordsFrame(2, 2, 3)
	flip[len(flip)-1] ^= 1
	ids, lf, err = readAll(t, writeFile(t, good, flip, recordsFrame(4, 4)))
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, []int64{0, 1, 4}, ids)
	require.Equal(t, 1, lf.Summary.CorruptFrames)
	require.Equal(t, uint64(2), lf.Summary.MissingPos)
}

func TestHolesAreSkippedAndCounted(t *testing.T) {
	var raw []byte
	for i := 0; i < 3; i++ {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(i))
		tsc := uint64(1000 + i)
		if i == 1 {
			tsc = 0
		}
		raw = binary.LittleEndian.AppendUint64(raw, tsc)
	}
	fh := FrameHeader{Kind: KindRecords, Flags: FlagSignal, N: 3, RawLen: uint32(len(raw))}
	ids, lf, err := readAll(t, writeFile(t, AppendFrame(nil, fh, raw), trailerFrame(3)))
	require.NoError(t, err)
	require.Equal(t, []int64{0, 2}, ids)
	require.Equal(t, uint64(1), lf.Summary.Holes)
	require.Equal(t, 1, lf.Summary.SignalFrames)
}

func frameWith(first uint64, flags uint16, recs ...[2]uint64) []byte {
	var raw []byte
	for _, r := range recs {
		raw = binary.LittleEndian.AppendUint64(raw, r[0])
		raw = binary.LittleEndian.AppendUint64(raw, r[1])
	}
	return AppendFrame(nil, FrameHeader{Kind: KindRecords, Flags: flags, N: uint32(len(recs)), FirstPos: first, RawLen: uint32(len(raw))}, raw)
}

// The SIGTERM flusher found position 1 reserved but unwritten; the normal
// writer wrote it later. Either order in the file, the record wins.
func TestSignalFrameHolesAreFilledByTheNormalFrame(t *testing.T) {
	sig := frameWith(0, FlagSignal, [2]uint64{10, 100}, [2]uint64{11, 0}, [2]uint64{12, 102})
	full := frameWith(0, 0, [2]uint64{10, 100}, [2]uint64{11, 101}, [2]uint64{12, 102}, [2]uint64{13, 103})
	tail := frameWith(2, FlagSignal, [2]uint64{12, 102}, [2]uint64{13, 0}, [2]uint64{14, 104})
	for _, order := range [][][]byte{{sig, full, tail}, {full, tail, sig}, {tail, sig, full}} {
		ids, lf, err := readAll(t, writeFile(t, append(order, trailerFrame(5))...))
		require.NoError(t, err)
		require.Equal(t, []int64{10, 11, 12, 13, 14}, ids)
		require.Zero(t, lf.Summary.Holes)
	}
	// FIRSTLAST: the flusher's snapshot and the close's final pair share
	// positions 0 and 1; the close's pair wins.
	snap := frameWith(0, FlagSignal, [2]uint64{1, 100}, [2]uint64{5, 500})
	final := frameWith(0, 0, [2]uint64{1, 100}, [2]uint64{9, 900})
	ids, _, err := readAll(t, writeFile(t, snap, final, trailerFrame(2)))
	require.NoError(t, err)
	require.Equal(t, []int64{1, 9}, ids)
}
