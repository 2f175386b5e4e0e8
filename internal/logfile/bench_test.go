package logfile

import "testing"

// The drain's per-block work: column encoding plus the codec, for one block
// of 65536 sequential-id records. Reports records/s and bytes per record.
func benchmarkBlock(b *testing.B, codec int) {
	const n = 65536
	raw := rawRecords(n, 16, 1)
	var cols, out []byte
	b.SetBytes(n * 16)
	for i := 0; i < b.N; i++ {
		cols = EncodeColumns(cols[:0], raw, n, 16)
		out = Compress(out[:0], cols, codec)
	}
	b.ReportMetric(float64(len(out))/n, "bytes/record")
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrecords/s")
}

func BenchmarkBlockZstd(b *testing.B)    { benchmarkBlock(b, CodecZstd) }
func BenchmarkBlockS2(b *testing.B)      { benchmarkBlock(b, CodecS2) }
func BenchmarkBlockColumns(b *testing.B) { benchmarkBlock(b, CodecColumns) }

// The reader's and analyze's per-block work the other way: a block of 65536
// sequential-id records decoded from its column encoding into records
// (DecodeColumns) and into columns (DecodeColumnPair). Reports records/s.
func BenchmarkDecodeColumns(b *testing.B) {
	const n = 65536
	cols := EncodeColumns(nil, rawRecords(n, 16, 1), n, 16)
	b.Run("records", func(b *testing.B) {
		var out []byte
		for b.Loop() {
			out, _ = DecodeColumns(out[:0], cols, n, 16)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrecords/s")
	})
	b.Run("pair", func(b *testing.B) {
		var ids []int64
		var tscs []uint64
		for b.Loop() {
			ids, tscs, _ = DecodeColumnPair(ids[:0], tscs[:0], cols, n)
		}
		b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mrecords/s")
	})
}
