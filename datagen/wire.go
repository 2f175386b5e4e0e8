package datagen

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// Frame types (FRAMING.md).
const (
	frameHello  = 1
	frameBucket = 2
	frameEnd    = 3
	frameReport = 4

	wireVersion   = 1
	maxFrame      = 64 << 20
	maxBucket     = 1 << 20
	maxPayload    = 16 << 20
	maxNameLen    = 256
	threadIDShift = 40
	recordHeader  = 12 // tuple id u64 + length u32
)

var magic = [4]byte{'C', 'P', 'D', 'G'}

// errMalformed marks a frame that cannot be parsed (FRAMING.md): its
// connection closes, and only it.
var errMalformed = errors.New("malformed")

func malformedf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errMalformed}, a...)...)
}

// Hello is the first frame of a connection.
type Hello struct {
	RunID   uint64
	Thread  uint32
	Threads uint32
	FirstID uint64
	Tuples  uint64
	Rate    float64
	Name    string
}

// End closes a connection's stream: what the thread sent.
type End struct {
	Tuples, Buckets uint64
}

func appendFrameHeader(b []byte, length int, typ byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(length))
	return append(b, typ)
}

func (h Hello) encode() []byte {
	body := make([]byte, 0, 64+len(h.Name))
	body = append(body, magic[:]...)
	body = binary.BigEndian.AppendUint16(body, wireVersion)
	body = binary.BigEndian.AppendUint16(body, 0)
	body = binary.BigEndian.AppendUint64(body, h.RunID)
	body = binary.BigEndian.AppendUint32(body, h.Thread)
	body = binary.BigEndian.AppendUint32(body, h.Threads)
	body = binary.BigEndian.AppendUint64(body, h.FirstID)
	body = binary.BigEndian.AppendUint64(body, h.Tuples)
	body = binary.BigEndian.AppendUint64(body, math.Float64bits(h.Rate))
	body = binary.BigEndian.AppendUint16(body, uint16(len(h.Name)))
	body = append(body, h.Name...)
	return append(appendFrameHeader(nil, len(body)+1, frameHello), body...)
}

func decodeHello(body []byte) (Hello, error) {
	var h Hello
	if len(body) < 51 {
		return h, malformedf("HELLO of %d bytes, want at least 51", len(body))
	}
	if [4]byte(body[0:4]) != magic {
		return h, malformedf("HELLO magic %q, want CPDG", body[0:4])
	}
	if v := binary.BigEndian.Uint16(body[4:]); v != wireVersion {
		return h, malformedf("wire version %d, this receiver speaks %d", v, wireVersion)
	}
	h.RunID = binary.BigEndian.Uint64(body[8:])
	h.Thread = binary.BigEndian.Uint32(body[16:])
	h.Threads = binary.BigEndian.Uint32(body[20:])
	h.FirstID = binary.BigEndian.Uint64(body[24:])
	h.Tuples = binary.BigEndian.Uint64(body[32:])
	h.Rate = math.Float64frombits(binary.BigEndian.Uint64(body[40:]))
	nameLen := int(binary.BigEndian.Uint16(body[48:]))
	if nameLen < 1 || nameLen > maxNameLen || len(body) != 50+nameLen {
		return h, malformedf("HELLO name of %d bytes in a body of %d", nameLen, len(body))
	}
	if h.Threads == 0 || h.Thread >= h.Threads {
		return h, malformedf("HELLO thread %d of %d", h.Thread, h.Threads)
	}
	if h.FirstID+h.Tuples < h.FirstID {
		return h, malformedf("HELLO range: first id %d + %d tuples overflows 64 bits", h.FirstID, h.Tuples)
	}
	h.Name = string(body[50:])
	return h, nil
}

// decodeEnd parses an END body: exactly two u64.
func decodeEnd(body []byte) (End, error) {
	if len(body) != 16 {
		return End{}, malformedf("END of %d bytes, want 16", len(body))
	}
	return End{Tuples: binary.BigEndian.Uint64(body), Buckets: binary.BigEndian.Uint64(body[8:])}, nil
}

// decodeReport parses a REPORT body (one JSON object).
func decodeReport(body []byte) (Report, error) {
	var rep Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return Report{}, malformedf("REPORT: %v", err)
	}
	return rep, nil
}

func (e End) encode() []byte {
	b := appendFrameHeader(nil, 17, frameEnd)
	b = binary.BigEndian.AppendUint64(b, e.Tuples)
	return binary.BigEndian.AppendUint64(b, e.Buckets)
}

// frameLimit is the largest body each frame type may have (FRAMING.md),
// or -1 for a type the reader does not take.
type frameLimit func(typ byte) int

// senderFrames: what a receiver takes from a sender.
func senderFrames(typ byte) int {
	switch typ {
	case frameHello:
		return 50 + maxNameLen
	case frameBucket:
		return maxFrame - 1
	case frameEnd:
		return 16
	}
	return -1
}

// receiverFrames: what a sender takes from a receiver.
func receiverFrames(typ byte) int {
	if typ == frameReport {
		return 1 << 20
	}
	return -1
}

// readFrame reads one frame into buf (reused, grown as needed) and returns
// its type and body. The type's limit is checked before the body is read,
// and the buffer grows only as the bytes arrive: a header that claims 64
// MiB costs nothing until they come.
func readFrame(r *bufio.Reader, buf []byte, limit frameLimit) (byte, []byte, error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, buf, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:4])) - 1
	lim := limit(hdr[4])
	if lim < 0 {
		return 0, buf, malformedf("unexpected frame type %d", hdr[4])
	}
	if n < 0 || n > lim {
		return 0, buf, malformedf("frame type %d with a body of %d bytes (at most %d)", hdr[4], n, lim)
	}
	buf = buf[:0]
	for len(buf) < n {
		k := min(n-len(buf), 1<<20)
		if cap(buf)-len(buf) < k {
			nb := make([]byte, len(buf), max(len(buf)+k, min(n, 2*cap(buf))))
			copy(nb, buf)
			buf = nb
		}
		m, err := io.ReadFull(r, buf[len(buf):len(buf)+k])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, buf, err
		}
	}
	return hdr[4], buf, nil
}

// forEachTuple walks a BUCKET body, checking its structure first so that a
// malformed bucket is refused whole.
func forEachTuple(body []byte, fn func(id uint64, payload []byte)) (int, error) {
	if len(body) < 4 {
		return 0, malformedf("BUCKET without a count")
	}
	count := int(binary.BigEndian.Uint32(body))
	if count < 1 || count > maxBucket {
		return 0, malformedf("BUCKET count %d out of range 1..%d", count, maxBucket)
	}
	off := 4
	for i := 0; i < count; i++ {
		if len(body)-off < recordHeader {
			return 0, malformedf("BUCKET cut in tuple %d of %d", i, count)
		}
		n := int(binary.BigEndian.Uint32(body[off+8:]))
		if n > maxPayload || len(body)-off-recordHeader < n {
			return 0, malformedf("BUCKET tuple %d: payload of %d bytes, %d left", i, n, len(body)-off-recordHeader)
		}
		off += recordHeader + n
	}
	if off != len(body) {
		return 0, malformedf("BUCKET has %d bytes after its %d tuples", len(body)-off, count)
	}
	off = 4
	for i := 0; i < count; i++ {
		id := binary.BigEndian.Uint64(body[off:])
		n := int(binary.BigEndian.Uint32(body[off+8:]))
		fn(id, body[off+recordHeader:off+recordHeader+n])
		off += recordHeader + n
	}
	return count, nil
}
