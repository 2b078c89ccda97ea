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
	States []State // the initial state, then one per step
}

// State is the part of the model's state the model-based test compares.
type State struct {
	Receipts map[string]Receipt `json:"receipts"` // by receipt number
	Work     map[string]Work    `json:"work"`     // by receipt number
	Claims   map[string][]Claim `json:"claims"`   // by worker
	LockedBy map[string]string  `json:"lockedBy"` // receipt number -> the worker whose open transaction holds its rows ("" for none)
	Last     Step               `json:"-"`        // the step that led here
}

// Receipt is the model's pginbox_receipts row.
type Receipt struct {
	Scope    string `json:"scope"`    // the tenant
	Msg      string `json:"msg"`      // the message ID
	Status   string `json:"status"`   // NONE: not created yet
	Version  int64  `json:"version"`  // the optimistic-locking version
	Attempts int64  `json:"attempts"` // attempts started
	Payload  bool   `json:"payload"`  // the payload is kept (not purged)
	ReplayOf int64  `json:"replayOf"` // the receipt this one replays, 0 for none
	Key      string `json:"key"`      // ordering key, "" for none
	Seq      int64  `json:"seq"`      // its number in the key, 0 for none
}

// Work is the model's pginbox_work row (Status NONE: no row).
type Work struct {
	Status   string `json:"status"`   // NONE: no row
	Scope    string `json:"scope"`    // the receipt's tenant
	Attempts int64  `json:"attempts"` // attempts started
	Token    int64  `json:"token"`    // the current claim's token, 0 for none
	Expired  bool   `json:"expired"`  // the lease has expired
	Due      bool   `json:"due"`      // available_at has passed: claimable
	Version  int64  `json:"version"`  // the optimistic-locking version
	Key      string `json:"key"`      // the row's ordering key, "" for none or skipped
	Seq      int64  `json:"seq"`      // its number in the key, 0 for none
}

// Claim is what a worker believes it holds.
type Claim struct {
	ID    int64 `json:"id"`    // the receipt claimed
	Token int64 `json:"token"` // the claim's token
}

// Step is the model's last action with its arguments and outcome.
type Step struct {
	Act     string `json:"act"`     // the action, e.g. accept, claim, commit
	Worker  string `json:"worker"`  // the worker acting, "" for an admin or the environment
	ID      int64  `json:"id"`      // the receipt acted on
	Token   int64  `json:"token"`   // the claim token used
	Scope   string `json:"scope"`   // an accept's tenant
	Msg     string `json:"msg"`     // an accept's message ID
	Flag    bool   `json:"flag"`    // an accept's acknowledgement, a failure's permanence, a crash's loss of unflushed claims
	Arg     int64  `json:"arg"`     // a requeue's or replay's expected version; how many receipts a recover or purge changed
	Created int64  `json:"created"` // the receipt a replay created or a commit or skip promoted
	Outcome string `json:"outcome"` // what the action returned
	Key     string `json:"key"`     // the ordering key (an accept's; a commit's work row's)
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
