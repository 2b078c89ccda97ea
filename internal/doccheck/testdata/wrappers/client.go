package doc

import (
	"context"

	"github.com/pginbox/pginbox/inbox"
)

// client: a fragment that uses a Client.
func _(ctx context.Context, client *inbox.Client) {
	//doc:block
}
