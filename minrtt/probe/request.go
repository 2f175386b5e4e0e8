package probe

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// RoundRequest is what a requester (tsc-round) asks of a server.
type RoundRequest struct {
	Label       string
	WaitNodes   int           // wait until this many nodes are registered; 0: run with whoever is
	WaitTimeout time.Duration // how long to wait for them (server default 10s)
}

// RequestRound asks the server at addr to run a round and waits until it is
// written; it returns the file's path (on the server's machine) and a
// summary. ctx bounds the whole exchange.
//
// A requester that waits for nodes (WaitNodes > 0) also waits, within its
// WaitTimeout, for a server not listening yet: a script that starts the
// server and its clients in the background and asks for the first round
// at once would otherwise race the server's start (a busy machine lost
// that race in a test). Without WaitNodes a refused connection is an
// error at once.
func RequestRound(ctx context.Context, addr string, req RoundRequest) (string, *RoundSummary, error) {
	c, err := dialServer(ctx, addr, req)
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	err = WriteMessage(c, &Message{Type: MsgRoundRequest, Label: req.Label, WaitNodes: req.WaitNodes,
		WaitTimeoutNs: int64(req.WaitTimeout)})
	if err != nil {
		return "", nil, err
	}
	body, err := ReadFrame(bufio.NewReader(c))
	if err != nil {
		if ctx.Err() != nil {
			return "", nil, fmt.Errorf("no answer from the server: %w", ctx.Err())
		}
		return "", nil, fmt.Errorf("reading the server's answer: %w", err)
	}
	m, err := DecodeMessage(body)
	if err != nil {
		return "", nil, err
	}
	if m.V != ProtocolVersion {
		return "", nil, fmt.Errorf("%w: %s", ErrVersion, versionError("server", m.V))
	}
	switch {
	case m.Type == MsgError:
		return "", nil, fmt.Errorf("server refused: %s", m.Error)
	case m.Type != MsgRoundDone:
		return "", nil, fmt.Errorf("server answered %q", m.Type)
	case m.Error != "":
		return "", nil, errors.New(m.Error)
	case m.Summary == nil:
		return "", nil, errors.New("server answered without a summary")
	}
	return m.Path, m.Summary, nil
}

// dialServer connects to the server, retrying a refused connection until
// the request's wait for nodes runs out (RequestRound).
func dialServer(ctx context.Context, addr string, req RoundRequest) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	wait := req.WaitTimeout
	if wait <= 0 {
		wait = 10 * time.Second // the server's default wait for nodes
	}
	deadline := time.Now().Add(wait)
	backoff := 20 * time.Millisecond
	for {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err == nil || req.WaitNodes <= 0 || !errors.Is(err, syscall.ECONNREFUSED) {
			return c, err
		}
		if time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("no server listening within %v: %w", wait, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}
