package sqs

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// API is the part of *sqs.Client the Consumer uses.
type API interface {
	// ReceiveMessage is (*sqs.Client).ReceiveMessage.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// DeleteMessage is (*sqs.Client).DeleteMessage.
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
	// ChangeMessageVisibility is (*sqs.Client).ChangeMessageVisibility.
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, opts ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
	// SendMessage is (*sqs.Client).SendMessage.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

// SendAPI is the part of *sqs.Client the Publisher uses.
type SendAPI interface {
	// SendMessage is (*sqs.Client).SendMessage.
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, opts ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
}

var (
	_ API     = (*sqs.Client)(nil)
	_ SendAPI = (*sqs.Client)(nil)
)
