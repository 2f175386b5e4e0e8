package minrtt

import (
	"encoding/json"
	"math"
	"strconv"
)

// Link's JSON form: snake_case names, and null for the NaN and infinite
// numbers a report carries for what was not measured (encoding/json refuses
// them, which would fail a whole report over one one-way pair).

// jsonFloat is a float64 written as null when NaN or infinite.
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*f = jsonFloat(math.NaN())
		return nil
	}
	v, err := strconv.ParseFloat(string(b), 64)
	*f = jsonFloat(v)
	return err
}

type linkJSON struct {
	Into            string      `json:"into"`
	From            string      `json:"from"`
	Rounds          int         `json:"rounds"`
	Probes          int         `json:"probes"`
	KernelProbes    int         `json:"kernel_probes,omitempty"`
	MinRTT          jsonFloat   `json:"min_rtt"`
	MinRTTRev       jsonFloat   `json:"min_rtt_rev"`
	AnchorErr       []jsonFloat `json:"anchor_err"`
	Ratio           jsonFloat   `json:"ratio"`
	RatioErr        jsonFloat   `json:"ratio_err"`
	RatioLo         jsonFloat   `json:"ratio_lo"`
	RatioHi         jsonFloat   `json:"ratio_hi"`
	PaperErrMid     jsonFloat   `json:"paper_err_mid"`
	AllProbesErrMid jsonFloat   `json:"allprobes_err_mid"`
	Used            bool        `json:"used"`
	Unusable        string      `json:"unusable,omitempty"`
}

// MarshalJSON writes the link with snake_case names; numbers that were not
// measured (NaN) are null.
func (l Link) MarshalJSON() ([]byte, error) {
	j := linkJSON{Into: l.Into, From: l.From, Rounds: l.Rounds, Probes: l.Probes, KernelProbes: l.KernelProbes,
		MinRTT: jsonFloat(l.MinRTT), MinRTTRev: jsonFloat(l.MinRTTRev),
		Ratio: jsonFloat(l.Ratio), RatioErr: jsonFloat(l.RatioErr),
		RatioLo: jsonFloat(l.RatioLo), RatioHi: jsonFloat(l.RatioHi),
		PaperErrMid: jsonFloat(l.PaperErrMid), AllProbesErrMid: jsonFloat(l.AllProbesErrMid),
		Used: l.Used, Unusable: l.Unusable}
	for _, e := range l.AnchorErr {
		j.AnchorErr = append(j.AnchorErr, jsonFloat(e))
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads what MarshalJSON wrote; null reads as NaN.
func (l *Link) UnmarshalJSON(b []byte) error {
	var j linkJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*l = Link{Into: j.Into, From: j.From, Rounds: j.Rounds, Probes: j.Probes, KernelProbes: j.KernelProbes,
		MinRTT: float64(j.MinRTT), MinRTTRev: float64(j.MinRTTRev),
		Ratio: float64(j.Ratio), RatioErr: float64(j.RatioErr),
		RatioLo: float64(j.RatioLo), RatioHi: float64(j.RatioHi),
		PaperErrMid: float64(j.PaperErrMid), AllProbesErrMid: float64(j.AllProbesErrMid),
		Used: j.Used, Unusable: j.Unusable}
	for _, e := range j.AnchorErr {
		l.AnchorErr = append(l.AnchorErr, float64(e))
	}
	return nil
}
