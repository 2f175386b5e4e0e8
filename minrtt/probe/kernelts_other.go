//go:build !linux

package probe

import (
	"errors"
	"net"
	"net/netip"
)

// Kernel timestamps are Linux's (SO_TIMESTAMPING): elsewhere the probes
// are timed by the processes, as in protocol version 1.

type stamper struct{ tx bool }

var errNoStamp = errors.New("no transmit timestamp")

func newStamper(*net.UDPConn, bool) (*stamper, error) {
	return nil, errors.New("kernel timestamps are Linux's")
}

func (s *stamper) read([]byte) (int, netip.AddrPort, error) {
	return 0, netip.AddrPort{}, errNoStamp
}

func (s *stamper) rxStamp() int64 { return 0 }

func (s *stamper) txStamp() (int64, error) { return 0, errNoStamp }

func (s *stamper) drain() {}

func interfaceTimestamping(net.IP) string { return "" }

func clockSlew() (float64, error) { return 0, errors.New("kernel timestamps are Linux's") }
