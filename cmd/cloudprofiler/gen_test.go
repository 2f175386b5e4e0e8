package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"cloudprofiler/datagen"

	"github.com/stretchr/testify/require"
)

func genRun(args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := runGen(&out, &errb, args)
	return out.String(), errb.String(), err
}

func exitOf(err error) int {
	var ec *exitCode
	if errors.As(err, &ec) {
		return ec.code
	}
	if err != nil {
		return 1
	}
	return 0
}

func TestGenSendExitCodes(t *testing.T) {
	// Everything received: exit 0, the receiver's numbers printed; or 3
	// when a busy machine kept the sender below the rate (the rate is
	// measured by make bench-gen, not asserted here).
	r, err := datagen.NewReceiver(datagen.ReceiverConfig{Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	go r.Serve(context.Background())
	defer r.Close()
	out, _, err := genRun("send", "--to", r.Addr().String(), "--rate", "20k", "--duration", "500ms", "--threads", "2", "--synthetic")
	if exitOf(err) == 3 {
		require.Contains(t, out, "NOT REACHED")
	} else {
		require.NoError(t, err, out)
		require.Contains(t, out, "(reached)")
	}
	require.Contains(t, out, "sent 10000 of 10000 tuples")
	require.Contains(t, out, "receiver: received 10000, lost 0")

	// A receiver that drops: exit 4, the lost ids listed.
	lossy, err := datagen.NewReceiver(datagen.ReceiverConfig{Listen: "127.0.0.1:0", Capacity: 5000, Queue: 500})
	require.NoError(t, err)
	go lossy.Serve(context.Background())
	defer lossy.Close()
	out, _, err = genRun("send", "--to", lossy.Addr().String(), "--rate", "50k", "--duration", "300ms", "--synthetic")
	require.Equal(t, 4, exitOf(err), "%v\n%s", err, out)
	require.Contains(t, out, "first missing id ranges")

	// A receiver that reads slowly and answers nothing: the rate is not
	// reached (exit 3), said so, and every tuple is still sent.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}()
		}
	}()
	out, _, err = genRun("send", "--to", ln.Addr().String(), "--rate", "100k", "--duration", "500ms", "--synthetic",
		"--report-timeout", "200ms")
	require.Equal(t, 3, exitOf(err), "%v\n%s", err, out)
	require.Contains(t, out, "sent 50000 of 50000 tuples")
	require.Contains(t, out, "NOT REACHED")
	require.Contains(t, out, "receiver: no report")
}

func TestGenFlagsAndTuplesFile(t *testing.T) {
	_, _, err := genRun()
	require.ErrorContains(t, err, "send, recv, maxrate or tuples")
	_, _, err = genRun("send", "--to", "127.0.0.1:1", "--rate", "fast", "--synthetic")
	require.ErrorContains(t, err, "not a rate")
	_, _, err = genRun("send", "--to", "127.0.0.1:1", "--rate", "1k")
	require.ErrorContains(t, err, "--tuples FILE or --synthetic")
	_, _, err = genRun("send", "--to", "127.0.0.1:1", "--rate", "1k", "--tuples", "/nonexistent")
	require.ErrorContains(t, err, "/nonexistent")
	_, _, err = genRun("maxrate", "--to", "127.0.0.1:1", "--synthetic")
	require.ErrorContains(t, err, "--start must be > 0")
	_, _, err = genRun("recv")
	require.ErrorContains(t, err, "--listen ADDR is required")
	_, _, err = genRun("recv", "--listen", "127.0.0.1:0", "--max-conns", "0")
	require.ErrorContains(t, err, "must be > 0")
	_, _, err = genRun("recv", "--listen", "127.0.0.1:0", "--idle-timeout", "-1s")
	require.ErrorContains(t, err, "must be > 0")

	path := filepath.Join(t.TempDir(), "t.bin")
	out, _, err := genRun("tuples", "--synthetic", "50", "--out", path)
	require.NoError(t, err)
	require.Contains(t, out, "wrote 50 tuples")
	p, err := datagen.LoadTuples(path)
	require.NoError(t, err)
	require.Len(t, p, 50)

	// The file as the payloads of a run.
	r, err := datagen.NewReceiver(datagen.ReceiverConfig{Listen: "127.0.0.1:0"})
	require.NoError(t, err)
	go r.Serve(context.Background())
	defer r.Close()
	out, _, err = genRun("send", "--to", r.Addr().String(), "--rate", "1k", "--duration", "200ms", "--tuples", path)
	if err != nil { // a busy machine may miss the rate (exit 3): the counts must still be exact
		var ec *exitCode
		require.ErrorAs(t, err, &ec, out)
		require.Equal(t, 3, ec.code, out)
	}
	require.Contains(t, out, "sent 200 of 200 tuples")
	require.Contains(t, out, "received 200, lost 0")
}
