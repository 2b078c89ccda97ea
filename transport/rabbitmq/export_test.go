package rabbitmq

// Connects is how many connections the Publisher opened, the first included.
// The conformance suite's publisher_context case reads it to see the
// reconnect; it is not part of the package's API.
func (p *Publisher) Connects() int64 { return p.connects.Load() }
