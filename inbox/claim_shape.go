package inbox

// claimShape returns how many scopes a claim of up to n receipts serves and
// how many it takes: each scope's share at least MessagesPerTx, so a slot's
// transaction (one scope, up to MessagesPerTx messages) can be full. With
// small shares a slot would start a transaction for the few messages of its
// scope (64 receipts over 16 scopes give 4 each), and a transaction costs
// about the same whatever it carries.
func (w *Worker) claimShape(n int) (scopes, count int) {
	per := w.cfg.MessagesPerTx
	scopes = w.cfg.ClaimScopes
	if n/per < scopes {
		scopes = max(1, n/per)
		if n >= per {
			n = scopes * per
		}
	}
	return scopes, n
}
