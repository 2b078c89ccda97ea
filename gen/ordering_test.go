package gen_test

import (
	"testing"

	"github.com/matryer/is"

	"github.com/pginbox/pginbox/inbox"
	"github.com/pginbox/pginbox/testdata/gen/basic"
)

// ordering=UserID: the generated message builder fills the ordering key
// from the payload; an event without ordering leaves it empty.
func TestGeneratedMessageCarriesTheOrderingKey(t *testing.T) {
	is := is.New(t)
	d := basic.Delivery{Scope: inbox.Tenant("t"), Source: "s", MessageID: "m"}
	msg, err := basic.UserSignedUpV2Message(basic.CrmSyncV2, d, basic.UserSignedUpV2{UserID: "u-7", Email: "a@b"})
	is.NoErr(err)
	is.Equal(msg.OrderingKey, "u-7")
	msg, err = basic.UserSignedUpMessage(basic.CrmSyncV2, d, basic.UserSignedUp{UserID: "u-7", Email: "a@b"})
	is.NoErr(err)
	is.Equal(msg.OrderingKey, "")
}
