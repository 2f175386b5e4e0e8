package probe

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// FuzzParsePacket: any datagram is a packet or an error, never a panic; a
// packet is exactly its 32 or 56 bytes (encoding it gives them back).
func FuzzParsePacket(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := ParsePacket(b)
		if err != nil {
			return
		}
		out := make([]byte, p.Size())
		p.Put(out)
		require.Equal(t, b, out)
	})
}

// FuzzReadMessage reads a control stream as the server does (the first
// message within MaxFirstMessage, the next within MaxMessage) and as a
// client or requester does (ReadFrame): frames, their JSON bodies, a
// hello's checks. Nothing may panic; a refused frame is too large or cut
// short; a message that decodes encodes back to one that decodes the same.
func FuzzReadMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for i := 0; ; i++ {
			max := uint32(MaxMessage)
			if i == 0 {
				max = MaxFirstMessage
			}
			body, err := ReadFrameMax(r, max)
			if err != nil {
				var tl *TooLargeError
				require.True(t, errors.As(err, &tl) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF), "%v", err)
				if tl != nil {
					require.Greater(t, tl.Len, max)
					require.NotEmpty(t, tl.Error())
				}
				return
			}
			require.LessOrEqual(t, len(body), int(max))
			m, err := DecodeMessage(body)
			if err != nil {
				continue
			}
			require.NotZero(t, m.V)
			require.NotEmpty(t, m.Type)
			if m.Type == MsgHello {
				if err := checkHello(m); err == nil {
					require.NotEmpty(t, m.Node.Name)
					require.Greater(t, m.Node.TSCHz, 0.0)
				}
			}
			var w bytes.Buffer
			if err := WriteMessage(&w, m); err != nil {
				var tl *TooLargeError
				require.ErrorAs(t, err, &tl) // JSON escaping can make it longer than it came
				continue
			}
			again, err := ReadFrame(&w)
			require.NoError(t, err)
			m2, err := DecodeMessage(again)
			require.NoError(t, err)
			j1, _ := json.Marshal(m)
			j2, _ := json.Marshal(m2)
			require.JSONEq(t, string(j1), string(j2))
		}
	})
}
