package doc

import (
	"context"

	"github.com/pginbox/pginbox/inbox"
)

func _(ctx context.Context, client *inbox.Client) {
	//doc:block
	_, _ = res, err
}
