package doc

import (
	"fmt"

	"github.com/pginbox/pginbox/inbox"
)

func _(payload []byte) {
	//doc:block
}
