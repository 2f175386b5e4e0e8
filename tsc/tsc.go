// Package tsc reads the time-stamp counter and characterises it: whether it
// is invariant, and its frequency with the method that found it.
package tsc

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// readRaw returns the hardware TSC (rdtscp: ordered after earlier instructions).
func readRaw() uint64

// Raw returns the hardware TSC, never faked.
func Raw() uint64 { return readRaw() }

// Read returns this process's TSC: the hardware counter, or, under
// CP_FAKE_TSC, the fake counter made from it (fake.go).
func Read() uint64 {
	t := readRaw()
	if f := active.Load(); f != nil {
		return f.Apply(t)
	}
	return t
}

func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// Frequency is the TSC rate and how it was obtained.
type Frequency struct {
	Hz     float64
	Source string // "cpuid-0x15", "hypervisor-0x40000010", "calibrated-mono-raw-50ms"
}

var (
	freqOnce sync.Once
	freq     Frequency
)

// Freq returns the frequency of the counter Read returns: the hardware's
// (HardwareFreq) times the fake rate under CP_FAKE_TSC.
func Freq() Frequency {
	hw := HardwareFreq()
	if f := active.Load(); f != nil {
		return Frequency{hw.Hz * f.Rate(), fmt.Sprintf("%s x fake rate %.9f", hw.Source, f.Rate())}
	}
	return hw
}

// HardwareFreq returns the hardware TSC frequency, found once per process:
// from CPUID leaf 0x15 (crystal ratio), else the hypervisor timing leaf
// 0x40000010, else by calibrating against CLOCK_MONOTONIC_RAW for 50 ms.
func HardwareFreq() Frequency {
	freqOnce.Do(func() {
		if hz := cpuid15(); hz > 0 {
			freq = Frequency{hz, "cpuid-0x15"}
		} else if hz := hypervisorLeaf(); hz > 0 {
			freq = Frequency{hz, "hypervisor-0x40000010"}
		} else {
			freq = Frequency{Calibrate(50 * time.Millisecond), "calibrated-mono-raw-50ms"}
		}
	})
	return freq
}

func cpuid15() float64 {
	max, _, _, _ := cpuid(0, 0)
	if max < 0x15 {
		return 0
	}
	den, num, crystal, _ := cpuid(0x15, 0)
	if den == 0 || num == 0 || crystal == 0 {
		return 0
	}
	return float64(crystal) * float64(num) / float64(den)
}

func hypervisorLeaf() float64 {
	_, _, c, _ := cpuid(1, 0)
	if c&(1<<31) == 0 { // not under a hypervisor
		return 0
	}
	max, _, _, _ := cpuid(0x40000000, 0)
	if max < 0x40000010 {
		return 0
	}
	khz, _, _, _ := cpuid(0x40000010, 0)
	return float64(khz) * 1000
}

// MonoRaw returns CLOCK_MONOTONIC_RAW in nanoseconds.
func MonoRaw() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC_RAW, &ts)
	return ts.Nano()
}

// Calibrate measures the TSC rate against CLOCK_MONOTONIC_RAW over d.
// It measures the hardware counter, never a fake one.
func Calibrate(d time.Duration) float64 {
	t0, m0 := bracket()
	time.Sleep(d)
	t1, m1 := bracket()
	return float64(t1-t0) / (float64(m1-m0) / 1e9)
}

// bracket reads the clock between two TSC reads and keeps the tightest try.
func bracket() (uint64, int64) {
	var bt uint64
	var bm int64
	best := ^uint64(0)
	for i := 0; i < 16; i++ {
		a := readRaw()
		m := MonoRaw()
		b := readRaw()
		if b-a < best {
			best, bt, bm = b-a, a+(b-a)/2, m
		}
	}
	return bt, bm
}

// Invariant reports whether the CPU advertises an invariant TSC (constant and
// nonstop), which the inter-node method requires (paper section 3.4).
func Invariant() (bool, string) {
	maxExt, _, _, _ := cpuid(0x80000000, 0)
	if maxExt >= 0x80000007 {
		_, _, _, d := cpuid(0x80000007, 0)
		if d&(1<<8) != 0 {
			return true, "cpuid 0x80000007 EDX[8]"
		}
	}
	b, err := os.ReadFile("/proc/cpuinfo")
	if err == nil {
		s := string(b)
		if strings.Contains(s, " constant_tsc") && strings.Contains(s, " nonstop_tsc") {
			return true, "/proc/cpuinfo constant_tsc nonstop_tsc"
		}
	}
	return false, "no invariant TSC advertised"
}

// Domain names the counter Read returns: the kernel's boot id (the TSC is
// one counter per machine and boot), and the fake counter's RATE:OFFSET
// under CP_FAKE_TSC (one machine then plays several). Two readings are
// comparable only within one domain: log headers and tsc-client's hello
// carry it, and analyze refuses a node name whose files or rounds come
// from more than one. "" when the boot id cannot be read (not Linux).
func Domain() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	id := strings.TrimSpace(string(b))
	if err != nil || id == "" {
		return ""
	}
	d := "boot " + id
	if f, ok := ActiveFake(); ok {
		d += " fake " + f.String()
	}
	return d
}
