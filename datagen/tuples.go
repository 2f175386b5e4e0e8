package datagen

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"os"
	"strconv"
)

// Payloads are the serialized tuples a sender cycles through: loaded before
// the run (Fig. 9: nothing is serialized on the critical path).
type Payloads [][]byte

// LoadTuples reads a file of records, each a u32 big-endian length and that
// many bytes (FRAMING.md).
func LoadTuples(path string) (Payloads, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	var out Payloads
	var off int64
	for {
		var hdr [4]byte
		n, err := io.ReadFull(r, hdr[:])
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: record %d at byte %d: cut in its length (%d of 4 bytes)", path, len(out), off, n)
		}
		size := binary.BigEndian.Uint32(hdr[:])
		if size > maxPayload {
			return nil, fmt.Errorf("%s: record %d at byte %d: length %d over the %d-byte limit (is the file big-endian length-prefixed?)",
				path, len(out), off, size, maxPayload)
		}
		p := make([]byte, size)
		if n, err := io.ReadFull(r, p); err != nil {
			return nil, fmt.Errorf("%s: record %d at byte %d: %d of %d bytes", path, len(out), off, n, size)
		}
		out = append(out, p)
		off += 4 + int64(size)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no records", path)
	}
	return out, nil
}

// WriteTuples writes payloads in the format LoadTuples reads.
func WriteTuples(w io.Writer, p Payloads) error {
	bw := bufio.NewWriter(w)
	for _, b := range p {
		if len(b) > maxPayload {
			return errors.New("datagen: payload over 16 MiB")
		}
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
		bw.Write(hdr[:])
		bw.Write(b)
	}
	return bw.Flush()
}

var (
	adTypes    = []string{"banner", "modal", "sponsored-search", "mail", "mobile"}
	eventTypes = []string{"view", "click", "purchase"}
)

// Synthetic returns n ad events shaped like the Yahoo streaming benchmark's
// (JSON: user_id, page_id, ad_id, ad_type, event_type, event_time,
// ip_address), from a fixed seed: 100 campaigns of 10 ads, as there.
func Synthetic(n int, seed int64) Payloads {
	r := rand.New(rand.NewSource(seed))
	uuid := func() string {
		var b [16]byte
		r.Read(b[:])
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		const hex = "0123456789abcdef"
		out := make([]byte, 0, 36)
		for i, c := range b {
			if i == 4 || i == 6 || i == 8 || i == 10 {
				out = append(out, '-')
			}
			out = append(out, hex[c>>4], hex[c&15])
		}
		return string(out)
	}
	ads := make([]string, 1000)
	for i := range ads {
		ads[i] = uuid()
	}
	out := make(Payloads, n)
	t := int64(1700000000000)
	for i := range out {
		t += int64(r.Intn(3))
		ip := strconv.Itoa(r.Intn(256)) + "." + strconv.Itoa(r.Intn(256)) + "." + strconv.Itoa(r.Intn(256)) + "." + strconv.Itoa(r.Intn(256))
		out[i] = []byte(`{"user_id":"` + uuid() + `","page_id":"` + uuid() + `","ad_id":"` + ads[r.Intn(len(ads))] +
			`","ad_type":"` + adTypes[r.Intn(len(adTypes))] + `","event_type":"` + eventTypes[r.Intn(len(eventTypes))] +
			`","event_time":"` + strconv.FormatInt(t, 10) + `","ip_address":"` + ip + `"}`)
	}
	return out
}
