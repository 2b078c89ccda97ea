package driver_test

import (
	"testing"

	"github.com/pginbox/pginbox/inbox/inboxtest"
)

func TestMain(m *testing.M) { inboxtest.Main(m) }
