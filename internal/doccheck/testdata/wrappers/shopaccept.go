package doc

import (
	"context"

	"github.com/pginbox/pginbox/examples/shop"
	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, client *inbox.Client, tenantID, eventID string) {
	//doc:block
	_ = res
}
