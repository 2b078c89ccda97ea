package webhook

import (
	"encoding/json"
	"net/http"
)

// HeaderOutcome is set on 2xx responses to "accepted" or "duplicate".
const HeaderOutcome = "Inbox-Outcome"

// acceptedBody is the JSON of a 2xx response.
type acceptedBody struct {
	Outcome string `json:"outcome"` // accepted or duplicate
	Receipt string `json:"receipt"`
	Status  string `json:"status"` // the receipt's current status
}

// errorBody is the JSON of every other response.
type errorBody struct {
	Code  string `json:"code"`
	Error string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	if a, ok := v.(acceptedBody); ok {
		w.Header().Set(HeaderOutcome, a.Outcome)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
