package logfile

import (
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A log file is untrusted input: the tests below damage files the way a
// disk, a crash or an attacker would and check that the decoder returns
// every whole frame, nothing that was not logged, says so when anything is
// missing, and allocates what the file header's block size allows, never
// what a frame header claims.

// zstdFile is a version 2 ZSTD_TSC file of three compressed frames of 50
// records (ids 0..149 at positions 0..149), two status slots and a trailer.
func zstdFile(t *testing.T) ([]byte, []Record) {
	t.Helper()
	h := testHeader(Version)
	h.Format, h.FormatID = "ZSTD_TSC", int32(ZstdTSC)
	var frames [][]byte
	frames = append(frames, AppendStatusFrame(nil, Status{Seq: 3, Accepted: 150, Written: 150, State: StateClosed}),
		AppendStatusFrame(nil, Status{Seq: 2, Accepted: 100, Written: 100}))
	var all []Record
	for f := 0; f < 3; f++ {
		var raw []byte
		for i := 0; i < 50; i++ {
			r := Record{TupleID: int64(f*50 + i), TSC: uint64(1_000_000 + 37*(f*50+i))}
			all = append(all, r)
			raw = binary.LittleEndian.AppendUint64(raw, uint64(r.TupleID))
			raw = binary.LittleEndian.AppendUint64(raw, r.TSC)
		}
		cols := EncodeColumns(nil, raw, 50, 16)
		frames = append(frames, AppendFrame(nil, FrameHeader{Kind: KindRecords, Codec: CodecZstd, N: 50,
			FirstPos: uint64(f * 50), RawLen: uint32(len(cols))}, Compress(nil, cols, CodecZstd)))
	}
	frames = append(frames, trailerFrame(150))
	return fileBytes(h, frames...), all
}

func readRecords(p string) ([]Record, *File, error) {
	lf, err := Open(p)
	if err != nil {
		return nil, nil, err
	}
	defer lf.Close()
	var got []Record
	err = lf.Records(func(r Record) error { got = append(got, r); return nil })
	return got, lf, err
}

func TestWholeFileReadsClean(t *testing.T) {
	b, all := zstdFile(t)
	got, lf, err := readRecords(writeBytes(t, b))
	require.NoError(t, err)
	require.Equal(t, all, got)
	require.Equal(t, uint64(150), lf.MaxRecords)
	require.Equal(t, uint64(3), lf.Summary.Status.Seq)
	require.Empty(t, lf.Summary.Problems(&lf.Header))
}

// Every byte of the file, flipped in turn (one bit, then all bits): the
// decoder never panics or fails the whole read over one frame, returns
// records only as they were logged (a subsequence, in order), and whenever
// it returns fewer it says the file is damaged.
func TestEveryByteFlipped(t *testing.T) {
	b, all := zstdFile(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "f.cplog")
	hdrEnd := 16 + int(binary.LittleEndian.Uint32(b[12:]))
	for i := range b {
		for _, mask := range []byte{0x01, 0xff} {
			c := append([]byte(nil), b...)
			c[i] ^= mask
			require.NoError(t, os.WriteFile(p, c, 0o644))
			got, lf, err := readRecords(p)
			if i < hdrEnd && lf == nil {
				require.Error(t, err) // the file header itself: refused with a reason
				continue
			}
			if lf == nil {
				t.Fatalf("byte %d ^%#x: Open failed past the header: %v", i, mask, err)
			}
			k := 0
			for _, r := range got {
				for k < len(all) && all[k] != r {
					k++
				}
				if k == len(all) {
					t.Fatalf("byte %d ^%#x: record %+v was never logged (or is out of order)", i, mask, r)
				}
				k++
			}
			if len(got) < len(all) {
				require.ErrorIs(t, err, ErrDamaged, "byte %d ^%#x: %d of %d records and no word of damage", i, mask, len(got), len(all))
			}
			if err == nil {
				require.Equal(t, all, got, "byte %d ^%#x", i, mask)
			}
			if i < hdrEnd {
				continue // the file header's JSON has no checksum: a changed value may refuse every frame, loudly
			}
			// At most one frame lost to one damaged byte.
			require.GreaterOrEqual(t, len(got), len(all)-50, "byte %d ^%#x", i, mask)
		}
	}
}

// allocDuring returns the bytes allocated while fn ran.
func allocDuring(fn func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	fn()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// Frame headers that claim huge sizes cost nothing: a 2 GB payload in a
// sparse file, 2^32-1 records, an S2 frame declaring 4 GB in a tiny file.
func TestHugeClaimsAreNotBelieved(t *testing.T) {
	good := recordsFrame(0, 0, 1)
	cases := map[string]func() []byte{
		"count 2^32-1": func() []byte {
			return AppendFrame(nil, FrameHeader{Kind: KindRecords, N: 1<<32 - 1, RawLen: 16}, make([]byte, 16))
		},
		"s2 declares 4 GB": func() []byte {
			return AppendFrame(nil, FrameHeader{Kind: KindRecords, Codec: CodecS2, N: 50, RawLen: 1<<32 - 1},
				Compress(nil, make([]byte, 600), CodecS2))
		},
		"zstd declares more than its count allows": func() []byte {
			return AppendFrame(nil, FrameHeader{Kind: KindRecords, Codec: CodecZstd, N: 2, RawLen: 1 << 30},
				Compress(nil, make([]byte, 600), CodecZstd))
		},
		"event of 1 GB": func() []byte {
			fh := FrameHeader{Kind: KindEvent, StoredLen: 1 << 30, Flags: FlagCRC}
			return fh.Append(nil)
		},
	}
	for name, frame := range cases {
		t.Run(name, func(t *testing.T) {
			var err error
			var got []Record
			alloc := allocDuring(func() {
				got, _, err = readRecords(writeFile(t, good, frame(), recordsFrame(2, 2, 3), trailerFrame(4)))
			})
			require.ErrorIs(t, err, ErrDamaged)
			require.Len(t, got, 4)
			require.Less(t, alloc, uint64(16<<20), "allocated %d bytes", alloc)
		})
	}
	t.Run("sparse 2 GB payload", func(t *testing.T) {
		fh := FrameHeader{Kind: KindRecords, N: 1 << 26, StoredLen: 1 << 31, RawLen: 1 << 31, Flags: FlagCRC}
		p := writeFile(t, good, fh.Append(nil))
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		require.NoError(t, err)
		st, _ := f.Stat()
		require.NoError(t, f.Truncate(st.Size()+1<<31)) // sparse: no disk used
		f.Close()
		var got []Record
		alloc := allocDuring(func() { got, _, err = readRecords(p) })
		require.ErrorIs(t, err, ErrDamaged)
		require.Len(t, got, 2)
		require.Less(t, alloc, uint64(16<<20), "allocated %d bytes", alloc)
	})
}

// A flipped codec byte no longer decodes compressed bytes as raw records.
func TestCodecFlipIsDamageNotRecords(t *testing.T) {
	b, all := zstdFile(t)
	// The first records frame follows the header and the two status slots.
	at := 16 + int(binary.LittleEndian.Uint32(b[12:])) + 2*StatusFrameSize
	require.Equal(t, byte(KindRecords), b[at+4])
	b[at+5] = CodecRaw
	got, lf, err := readRecords(writeBytes(t, b))
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, all[50:], got)
	require.Equal(t, uint64(50), lf.Summary.MissingPos)
}

// Version 1 files (no status, CRC of the payload only) are still read.
func TestVersion1FilesAreRead(t *testing.T) {
	var raw []byte
	for i := 0; i < 3; i++ {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(i))
		raw = binary.LittleEndian.AppendUint64(raw, uint64(100+i))
	}
	fh := FrameHeader{Kind: KindRecords, Flags: FlagCRC, N: 3, StoredLen: 48, RawLen: 48, CRC: CRC(raw)}
	unchecked := FrameHeader{Kind: KindRecords, N: 1, StoredLen: 16, FirstPos: 3, RawLen: 16} // IDENTITY, v1: no CRC
	js, _ := json.Marshal(Trailer{Reason: "test", Positions: 4})
	tr := FrameHeader{Kind: KindTrailer, Flags: FlagCRC, StoredLen: uint32(len(js)), RawLen: uint32(len(js)), CRC: CRC(js)}
	rec3 := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, 3), 103)
	b := fileBytes(testHeader(1), append(fh.Append(nil), raw...), append(unchecked.Append(nil), rec3...), append(tr.Append(nil), js...))
	got, lf, err := readRecords(writeBytes(t, b))
	require.NoError(t, err)
	require.Len(t, got, 4)
	require.Equal(t, 1, lf.Summary.Version)
	require.Nil(t, lf.Summary.Status)

	// A version 2 reader does not take a version 2 frame without its seal.
	b2 := fileBytes(testHeader(2), append(fh.Append(nil), raw...), trailerFrame(3))
	got, _, err = readRecords(writeBytes(t, b2))
	require.ErrorIs(t, err, ErrDamaged)
	require.Empty(t, got)
}

// A process killed before closing: the status says how many it had
// accepted, the ring's size bounds what it may have accepted since.
func TestKilledProcessSaysWhatIsMissing(t *testing.T) {
	p := writeFile(t, AppendStatusFrame(nil, Status{Seq: 1, Accepted: 64}),
		AppendStatusFrame(nil, Status{Seq: 2, Accepted: 100, Written: 64}),
		recordsFrame(0, 0, 1), recordsFrame(2, 2, 3))
	got, lf, err := readRecords(p)
	require.ErrorIs(t, err, ErrDamaged)
	require.Len(t, got, 4)
	probs := strings.Join(lf.Summary.Problems(&lf.Header), "\n")
	require.Contains(t, probs, "96 records accepted by the last status update are not in the file")
	require.Contains(t, probs, "up to 256 more records")
}

// Records accepted and never written (the disk stayed full, and also
// refused the trailer): the status slot written in place says so.
func TestUnwrittenCountedInTheStatus(t *testing.T) {
	p := writeFile(t, AppendStatusFrame(nil, Status{Seq: 4, Accepted: 70, Written: 2, Unwritten: 68, Errno: 28, State: StateClosedLoss}),
		AppendStatusFrame(nil, Status{Seq: 3, Accepted: 70}), recordsFrame(0, 0, 1))
	got, lf, err := readRecords(p)
	require.ErrorIs(t, err, ErrDamaged)
	require.Len(t, got, 2)
	probs := lf.Summary.Problems(&lf.Header)
	require.Equal(t, []string{"68 accepted records were never written (no space left on device)"}, probs)

	// A torn status update: the other slot stands.
	b, _ := os.ReadFile(p)
	at := 16 + int(binary.LittleEndian.Uint32(b[12:]))
	b[at+40] ^= 0xff
	_, lf, err = readRecords(writeBytes(t, b))
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, uint64(3), lf.Summary.Status.Seq)
	require.Equal(t, 1, lf.Summary.CorruptFrames)
}

// ASCII: a torn line, garbage and an endless line are skipped and counted;
// every other line is read.
func TestASCIIDamageSkipsLines(t *testing.T) {
	h := testHeader(Version)
	h.Format, h.FormatID, h.Handler, h.BlockRecords, h.RingBlocks = "ASCII_TSC", int32(ASCIITSC), "IDENTITY", 0, 0
	js, _ := json.Marshal(h)
	lines := []string{ASCIIMagic, "#header " + string(js), "#columns tuple_id,tsc",
		strings.TrimSuffix(string(AppendStatusLine(nil, Status{Seq: 1, Accepted: 6, State: StateClosed})), "\n"),
		"0,100", "1,10", "2,102,7", "\x00\x01garbage", strings.Repeat("9", 100000), "5,105",
		`#trailer {"reason":"test","positions":6}`}
	p := writeBytes(t, []byte(strings.Join(lines, "\n")+"\n"))
	got, lf, err := readRecords(p)
	require.ErrorIs(t, err, ErrDamaged)
	require.Equal(t, []Record{{TupleID: 0, TSC: 100}, {TupleID: 1, TSC: 10}, {TupleID: 5, TSC: 105}}, got)
	require.Equal(t, 3, lf.Summary.CorruptLines)
	require.Equal(t, int64(100001), lf.Summary.CorruptBytes)
	require.Contains(t, err.Error(), "3 damaged lines skipped")
}

// FuzzOpenRead: any bytes after a valid file header. Open and a full read
// must not panic, must return at most MaxRecords records, and must report
// damage whenever the frames are not exactly the valid file's.
func FuzzOpenRead(f *testing.F) {
	b, _ := zstdFile(&testing.T{})
	h := testHeader(Version)
	h.Format, h.FormatID = "ZSTD_TSC", int32(ZstdTSC)
	head := fileBytes(h)
	f.Add(b[len(head):])
	f.Add(append(recordsFrame(0, 1, 2), trailerFrame(2)...))
	f.Add([]byte("CPFR garbage"))
	p := filepath.Join(f.TempDir(), "f.cplog") // one worker, one file at a time
	f.Fuzz(func(t *testing.T, body []byte) {
		if err := os.WriteFile(p, append(append([]byte(nil), head...), body...), 0o644); err != nil {
			t.Fatal(err)
		}
		lf, err := Open(p)
		if err != nil {
			return
		}
		defer lf.Close()
		n := uint64(0)
		_ = lf.Records(func(Record) error { n++; return nil })
		if n > lf.MaxRecords {
			t.Fatalf("%d records, MaxRecords %d", n, lf.MaxRecords)
		}
	})
}

// FuzzDecompress: a payload that claims rawLen never decodes to more.
func FuzzDecompress(f *testing.F) {
	f.Add(Compress(nil, []byte("hello hello hello"), CodecZstd), uint8(CodecZstd), uint16(17))
	f.Add(Compress(nil, []byte("hello hello hello"), CodecS2), uint8(CodecS2), uint16(17))
	f.Fuzz(func(t *testing.T, src []byte, codec uint8, rawLen uint16) {
		out, err := Decompress(nil, src, int(codec%4), int(rawLen))
		if err == nil && codec%4 != CodecRaw && codec%4 != CodecColumns && len(out) != int(rawLen) {
			t.Fatalf("decoded %d bytes, frame says %d", len(out), rawLen)
		}
	})
}

// A file whose SIGTERM flush wrote every accepted record, and whose
// drainer's next frame the process's death cut short, ends in a torn
// duplicate: no problem. The same tail with a position missing, or after
// a plain close (no signal flush), is "cut short".
func TestTornAfterSignal(t *testing.T) {
	h := &Header{Handler: "BUFFER_IDENTITY", BlockRecords: 256}
	sum := func(records uint64, state uint32) *Summary {
		return &Summary{Read: "records", Records: records, TruncatedBytes: 60251,
			Status: &Status{Accepted: 1000, Written: 1000, State: state}}
	}
	require.Empty(t, sum(1000, StateSignal).Problems(h))
	require.True(t, sum(1000, StateSignal).TornAfterSignal(h))
	require.Contains(t, strings.Join(sum(999, StateSignal).Problems(h), "; "), "cut short: 60251 bytes")
	require.Contains(t, strings.Join(sum(1000, StateClosed).Problems(h), "; "), "cut short: 60251 bytes")
	require.Contains(t, strings.Join(sum(1000, StateSignal).Problems(&Header{Handler: "PERIODICCOUNTER"}), "; "), "cut short")
}
