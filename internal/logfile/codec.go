package logfile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC is CRC-32C, the checksum of frames (version 1: of the payload only).
func CRC(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// FrameCRC is a version 2 frame's checksum: CRC-32C of the frame header's
// first 28 bytes (everything but the CRC field) followed by the payload.
func FrameCRC(head28, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(head28[:28], castagnoli), castagnoli, payload)
}

// EncodeColumns appends the column encoding of n raw records (recSize 16 or
// 24, little endian, as in the ring): all tuple-id deltas, then all TSC
// deltas, then all mono deltas, each zigzag varint. Sequential ids and
// steady clocks turn into runs of small bytes a codec squeezes well.
func EncodeColumns(dst, raw []byte, n, recSize int) []byte {
	for col := 0; col*8 < recSize; col++ {
		var prev uint64
		for i := 0; i < n; i++ {
			v := binary.LittleEndian.Uint64(raw[i*recSize+col*8:])
			d := int64(v - prev)
			prev = v
			dst = binary.AppendUvarint(dst, uint64(d<<1)^uint64(d>>63))
		}
	}
	return dst
}

// DecodeColumns reverses EncodeColumns into raw records.
func DecodeColumns(dst, src []byte, n, recSize int) ([]byte, error) {
	start := len(dst)
	dst = append(dst, make([]byte, n*recSize)...)
	out := dst[start:]
	p := 0
	for col := 0; col*8 < recSize; col++ {
		var prev uint64
		for i := 0; i < n; i++ {
			var u uint64
			if p < len(src) && src[p] < 0x80 { // here, not in uvarintAt: it would not inline
				u = uint64(src[p])
				p++
			} else {
				var q int
				if u, q = uvarintAt(src, p); q <= p {
					return dst, errors.New("column encoding cut short")
				}
				p = q
			}
			prev += uint64(int64(u>>1) ^ -int64(u&1))
			binary.LittleEndian.PutUint64(out[i*recSize+col*8:], prev)
		}
	}
	if p != len(src) {
		return dst, fmt.Errorf("column encoding has %d trailing bytes", len(src)-p)
	}
	return dst, nil
}

// DecodeColumnPair reverses EncodeColumns of n records of 16 bytes (two
// columns: tuple ids and TSCs) into the columns themselves, appended to
// c0 and c1: DecodeColumns without the records in between.
func DecodeColumnPair[A, B ~int64 | ~uint64](c0 []A, c1 []B, src []byte, n int) ([]A, []B, error) {
	c0, p, err := appendDeltas(c0, src, 0, n)
	if err != nil {
		return c0, c1, err
	}
	if c1, p, err = appendDeltas(c1, src, p, n); err != nil {
		return c0, c1, err
	}
	if p != len(src) {
		return c0, c1, fmt.Errorf("column encoding has %d trailing bytes", len(src)-p)
	}
	return c0, c1, nil
}

// appendDeltas appends the n values of the column whose zigzag varint
// deltas start at src[p], and returns the offset after them.
func appendDeltas[T ~int64 | ~uint64](dst []T, src []byte, p, n int) ([]T, int, error) {
	dst = slices.Grow(dst, n)
	var prev uint64
	for range n {
		var u uint64
		if p < len(src) && src[p] < 0x80 { // as in DecodeColumns
			u = uint64(src[p])
			p++
		} else {
			var q int
			if u, q = uvarintAt(src, p); q <= p {
				return dst, p, errors.New("column encoding cut short")
			}
			p = q
		}
		prev += uint64(int64(u>>1) ^ -int64(u&1))
		dst = append(dst, T(prev))
	}
	return dst, p, nil
}

// uvarintAt is binary.Uvarint of src[p:] and the offset after it (<= p
// when src ends first or the varint overflows). Its callers take a byte
// below 0x80 (a delta of a climbing id) themselves, without the loop.
func uvarintAt(src []byte, p int) (uint64, int) {
	if p >= len(src) {
		return 0, p
	}
	u, k := binary.Uvarint(src[p:])
	if k <= 0 {
		return 0, p
	}
	return u, p + k
}

var (
	zstdOnce sync.Once
	zEnc     *zstd.Encoder
	zDec     *zstd.Decoder
	// zEncMany is zEnc for writers on several goroutines at once (a cut
	// writes one file a worker): EncodeAll waits for a free encoder, and
	// zEnc has one (the library's drain needs no more, nor the memory of
	// one a core). The same options otherwise: the same bytes out.
	zEncManyOnce sync.Once
	zEncMany     *zstd.Encoder
)

// compressMany is Compress for writers on several goroutines at once.
func compressMany(dst, src []byte, codec int) []byte {
	if codec != CodecZstd {
		return Compress(dst, src, codec)
	}
	zEncManyOnce.Do(func() {
		var err error
		zEncMany, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err)
		}
	})
	return zEncMany.EncodeAll(src, dst)
}

func zstdInit() {
	zstdOnce.Do(func() {
		var err error
		zEnc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest),
			zstd.WithEncoderConcurrency(1), zstd.WithLowerEncoderMem(true))
		if err != nil {
			panic(err)
		}
		// DecodeAll writes at most cap(dst)-len(dst) bytes (Decompress sizes
		// dst from the frame's RawLen): a frame cannot make it allocate more.
		// One decoder per core: DecodeAll calls beyond the decoder count
		// wait for one (analyze decodes files on every core).
		zDec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)), zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxMemory(MaxBlockRecords*24*binary.MaxVarintLen64/8))
		if err != nil {
			panic(err)
		}
	})
}

// Compress appends src compressed with codec to dst.
func Compress(dst, src []byte, codec int) []byte {
	switch codec {
	case CodecZstd:
		zstdInit()
		return zEnc.EncodeAll(src, dst)
	case CodecS2:
		need := s2.MaxEncodedLen(len(src))
		start := len(dst)
		dst = append(dst, make([]byte, need)...)
		enc := s2.Encode(dst[start:], src)
		return dst[:start+len(enc)]
	}
	return append(dst, src...)
}

// Decompress appends the decoded payload to dst.
func Decompress(dst, src []byte, codec int, rawLen int) ([]byte, error) {
	switch codec {
	case CodecZstd:
		zstdInit()
		dst = slices.Grow(dst, rawLen)
		out, err := zDec.DecodeAll(src, dst[:len(dst):len(dst)+rawLen])
		if err == nil && len(out)-len(dst) != rawLen {
			err = fmt.Errorf("zstd length %d, frame says %d", len(out)-len(dst), rawLen)
		}
		return out, err
	case CodecS2:
		n, err := s2.DecodedLen(src)
		if err != nil {
			return dst, err
		}
		if n != rawLen {
			return dst, fmt.Errorf("s2 length %d, frame says %d", n, rawLen)
		}
		start := len(dst)
		dst = append(dst, make([]byte, n)...)
		_, err = s2.Decode(dst[start:], src)
		return dst, err
	case CodecRaw, CodecColumns:
		return append(dst, src...), nil
	}
	return dst, fmt.Errorf("unknown codec %d", codec)
}
