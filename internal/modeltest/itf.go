package modeltest

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// Trace is one run of the model as Quint writes it (--out-itf): the state
// after every step.
type Trace struct {
	States []State
}

// State is the part of the model's state the model-based test compares.
type State struct {
	Receipts map[string]Receipt `json:"receipts"`
	Work     map[string]Work    `json:"work"`
	Claims   map[string][]Claim `json:"claims"`
	LockedBy map[string]string  `json:"lockedBy"`
	Last     Step               `json:"-"`
}

// Receipt is the model's pginbox_receipts row.
type Receipt struct {
	Scope    string `json:"scope"`
	Msg      string `json:"msg"`
	Status   string `json:"status"`
	Version  int64  `json:"version"`
	Attempts int64  `json:"attempts"`
	Payload  bool   `json:"payload"`
	ReplayOf int64  `json:"replayOf"`
	Key      string `json:"key"` // ordering key, "" for none
	Seq      int64  `json:"seq"` // its number in the key, 0 for none
}

// Work is the model's pginbox_work row (Status NONE: no row).
type Work struct {
	Status   string `json:"status"`
	Scope    string `json:"scope"`
	Attempts int64  `json:"attempts"`
	Token    int64  `json:"token"`
	Expired  bool   `json:"expired"`
	Due      bool   `json:"due"`
	Version  int64  `json:"version"`
	Key      string `json:"key"` // the row's ordering key, "" for none or skipped
	Seq      int64  `json:"seq"`
}

// Claim is what a worker believes it holds.
type Claim struct {
	ID    int64 `json:"id"`
	Token int64 `json:"token"`
}

// Step is the model's last action with its arguments and outcome.
type Step struct {
	Act     string `json:"act"`
	Worker  string `json:"worker"`
	ID      int64  `json:"id"`
	Token   int64  `json:"token"`
	Scope   string `json:"scope"`
	Msg     string `json:"msg"`
	Flag    bool   `json:"flag"`
	Arg     int64  `json:"arg"`
	Created int64  `json:"created"`
	Outcome string `json:"outcome"`
	Key     string `json:"key"`
}

// ReadTrace reads an ITF file of the receipts model.
func ReadTrace(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var raw struct {
		States []map[string]any `json:"states"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	tr := &Trace{}
	for i, s := range raw.States {
		var st State
		if err := convert(plain(s["st"]), &st); err != nil {
			return nil, fmt.Errorf("%s: state %d: %w", path, i, err)
		}
		if err := convert(plain(s["last"]), &st.Last); err != nil {
			return nil, fmt.Errorf("%s: state %d: %w", path, i, err)
		}
		tr.States = append(tr.States, st)
	}
	return tr, nil
}

// plain turns ITF's encodings into plain JSON values: #bigint into a number,
// #map into an object keyed by the key's text, #set and #tup into arrays.
func plain(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if n, ok := x["#bigint"].(string); ok {
			i, _ := strconv.ParseInt(n, 10, 64)
			return i
		}
		if pairs, ok := x["#map"].([]any); ok {
			out := map[string]any{}
			for _, p := range pairs {
				kv := p.([]any)
				out[fmt.Sprint(plain(kv[0]))] = plain(kv[1])
			}
			return out
		}
		for _, k := range []string{"#set", "#tup"} {
			if items, ok := x[k].([]any); ok {
				out := make([]any, len(items))
				for i, it := range items {
					out[i] = plain(it)
				}
				return out
			}
		}
		out := map[string]any{}
		for k, it := range x {
			out[k] = plain(it)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, it := range x {
			out[i] = plain(it)
		}
		return out
	}
	return v
}

func convert(v any, dst any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}
