package sqs

import (
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"
)

// queueMissing says whether err means the queue does not exist: the
// modeled error, or the query-protocol code some SQS-compatible servers
// still send.
func queueMissing(err error) bool {
	if _, ok := errors.AsType[*types.QueueDoesNotExist](err); ok {
		return true
	}
	ae, ok := errors.AsType[smithy.APIError](err)
	return ok && (ae.ErrorCode() == "QueueDoesNotExist" || ae.ErrorCode() == "AWS.SimpleQueueService.NonExistentQueue")
}
