package probe

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Inject emulates network delay inside the client, for tests on one machine
// where the kernel has no netem. The origin waits a sampled forward delay
// after reading Send and before sending; the responder waits a sampled
// reverse delay after reading Resp and before replying. Seen from the
// counters, both are network delay, asymmetric when Fwd != Rev.
//
// A sampled delay is base + uniform[0, Jitter) + (Spike with probability
// SpikeP).
type Inject struct {
	Fwd, Rev time.Duration
	Jitter   time.Duration
	SpikeP   float64
	Spike    time.Duration
	Seed     uint64
}

// ParseInject reads a spec such as
// "fwd=40us,rev=10us,jitter=30us,spike=0.02:400us,seed=7". An empty spec is
// no injection (nil). Every key is optional; the seed defaults to 1 so that
// runs repeat.
func ParseInject(spec string) (*Inject, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	in := &Inject{Seed: 1}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return nil, fmt.Errorf("inject %q: %q is not key=value", spec, kv)
		}
		var err error
		switch k {
		case "fwd":
			in.Fwd, err = parseDelay(v)
		case "rev":
			in.Rev, err = parseDelay(v)
		case "jitter":
			in.Jitter, err = parseDelay(v)
		case "spike":
			p, d, ok := strings.Cut(v, ":")
			if !ok {
				return nil, fmt.Errorf("inject %q: spike wants PROB:DELAY, e.g. 0.02:400us", spec)
			}
			in.SpikeP, err = strconv.ParseFloat(p, 64)
			if err == nil && (in.SpikeP < 0 || in.SpikeP > 1) {
				err = fmt.Errorf("spike probability %v not in [0, 1]", in.SpikeP)
			}
			if err == nil {
				in.Spike, err = parseDelay(d)
			}
		case "seed":
			in.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return nil, fmt.Errorf("inject %q: unknown key %q (fwd, rev, jitter, spike, seed)", spec, k)
		}
		if err != nil {
			return nil, fmt.Errorf("inject %q: %s: %v", spec, k, err)
		}
	}
	return in, nil
}

func parseDelay(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d < 0 || d > time.Second {
		return 0, fmt.Errorf("delay %v not in [0, 1s]", d)
	}
	return d, nil
}

// String is the spec form of in.
func (in *Inject) String() string {
	if in == nil {
		return ""
	}
	return fmt.Sprintf("fwd=%v,rev=%v,jitter=%v,spike=%v:%v,seed=%d", in.Fwd, in.Rev, in.Jitter, in.SpikeP, in.Spike, in.Seed)
}

// delayer samples one side's delays. Origin and responder each own one
// (they run on different goroutines, and rand.Rand is not safe to share).
type delayer struct {
	base, jitter, spike time.Duration
	p                   float64
	rng                 *rand.Rand
}

func (in *Inject) forward() *delayer {
	if in == nil {
		return nil
	}
	return &delayer{in.Fwd, in.Jitter, in.Spike, in.SpikeP, rand.New(rand.NewPCG(in.Seed, 0xf0))}
}

func (in *Inject) reverse() *delayer {
	if in == nil {
		return nil
	}
	return &delayer{in.Rev, in.Jitter, in.Spike, in.SpikeP, rand.New(rand.NewPCG(in.Seed, 0x5e))}
}

// wait sleeps for one sampled delay. Sub-millisecond delays spin: they stand
// in for time on the wire, and a timer would add its own wake-up latency
// (tens of microseconds) to every probe. Longer ones sleep.
func (d *delayer) wait() {
	if d == nil {
		return
	}
	t := d.base
	if d.jitter > 0 {
		t += time.Duration(d.rng.Int64N(int64(d.jitter)))
	}
	if d.p > 0 && d.rng.Float64() < d.p {
		t += d.spike
	}
	if t <= 0 {
		return
	}
	if t >= time.Millisecond {
		time.Sleep(t)
		return
	}
	for start := time.Now(); time.Since(start) < t; {
	}
}
