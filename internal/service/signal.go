package service

// Signal sends on a wake-up channel without blocking; one pending signal is
// enough. The channel wants a buffer of one.
func Signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
