// Package basic covers the declaration format without a -queries package.
package basic

import "errors"

//inbox:event type=user.signed_up version=1 consumers=welcome.mailer,crm.sync.v2
type UserSignedUp struct {
	UserID string `json:"userId"`
	Email  string `json:"email"`
}

func (u UserSignedUp) Validate() error {
	if u.UserID == "" {
		return errors.New("userId is required")
	}
	return nil
}

// UserSignedUpV2 is a second version: a separate Go type, ordered per user.
//
//inbox:event type=user.signed_up version=2 consumers=crm.sync.v2 unknown=allow ordering=UserID
type UserSignedUpV2 struct {
	UserID string `json:"userId"`
	Email  string `json:"email"`
	Locale string `json:"locale"`
}

type (
	// Grouped declarations carry the directive on their own spec.
	//
	//inbox:event type="user deleted" version=3 consumers="2fa reset,crm.sync.v2" unknown=reject
	userDeleted struct {
		UserID string `json:"userId"`
	}

	NotAnEvent struct{}
)
