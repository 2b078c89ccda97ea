package gen

import (
	"bytes"
	"fmt"
	"go/format"
	"path"
	"strconv"
	"strings"
	"text/template"
)

func emit(m *model) ([]byte, error) {
	var buf bytes.Buffer
	if err := fileTmpl.Execute(&buf, m); err != nil {
		return nil, fmt.Errorf("inboxgen: rendering: %w", err)
	}
	src, err := format.Source(buf.Bytes())
	if err != nil {
		// A bug in the template, not in the declarations: show what was produced.
		return nil, fmt.Errorf("inboxgen: formatting generated code: %w\n%s", err, buf.Bytes())
	}
	return src, nil
}

var fileTmpl = template.Must(template.New("file").Funcs(template.FuncMap{
	"quote": strconv.Quote,
	"idents": func(cs []*consumer) string {
		names := make([]string, len(cs))
		for i, c := range cs {
			names[i] = c.Ident
		}
		return strings.Join(names, ", ")
	},
	"importAlias": func(q *queriesPkg) string {
		if path.Base(q.Path) == q.Name {
			return ""
		}
		return q.Name + " "
	},
}).Parse(`{{- /* gofmt fixes the spacing; keep this readable instead. */ -}}
` + Header + `

package {{.Package}}

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
{{- with .Queries}}{{if not .Local}}

	{{importAlias .}}{{quote .Path}}
{{- end}}{{end}}
)

// Delivery is one delivery of an event to accept: its identity without the
// consumer, which the accept functions take as a typed value.
type Delivery struct {
	// Scope is inbox.Tenant(id), with the ID taken from authenticated context,
	// or inbox.Global().
	Scope inbox.Scope
	// Source is the producer system.
	Source string
	// MessageID is the producer's event ID, stable across redeliveries.
	MessageID string
	// Metadata (trace headers, correlation and causation IDs) is stored with
	// the receipt but not fingerprinted.
	Metadata map[string]string
}

// ConsumerNames returns the consumers declared in this package, sorted, for
// inbox.Config.Consumers and inbox.WorkerConfig.Consumers.
func ConsumerNames() []string {
	return []string{ {{- range .Consumers}}{{quote .Name}}, {{end -}} }
}
{{range $c := .Consumers}}
// {{.Ident}} is the consumer {{quote .Name}}.
var {{.Ident}} {{.Ident}}Consumer

// {{.Ident}}Consumer is the type of {{.Ident}}.
type {{.Ident}}Consumer struct{}

// Name returns {{quote .Name}}.
func ({{.Ident}}Consumer) Name() string { return {{quote .Name}} }
{{range .Events}}
func ({{$c.Ident}}Consumer) consumes{{.Name}}() {}
{{end}}
// {{.Ident}}Handler handles every event consumer {{quote .Name}} declared.
// Register an implementation with Register{{.Ident}}.{{if $.Queries}} Each method's q
// runs on m.Tx, so its writes commit together with the receipt's completion.{{end}}
type {{.Ident}}Handler interface {
{{- range .Events}}
	// Handle{{.Name}} handles {{.Type}} v{{.Version}}.
	Handle{{.Name}}(ctx context.Context, m *handler.Msg, {{with $.Queries}}q *{{.Qual}}Queries, {{end}}p {{.GoType}}) error
{{- end}}
}

// Register{{.Ident}} registers h for every event consumer {{quote .Name}}
// declared. If any of them is registered already, it registers none and
// returns an error matching handler.ErrDuplicateHandler.
func Register{{.Ident}}(reg *handler.Registry, h {{.Ident}}Handler) error {
	return inboxgenRegister(reg, {{quote .Name}}, h, []inboxgenEntry{
{{- range .Events}}
		{
			key: handler.Key{Consumer: {{quote $c.Name}}, EventType: {{quote .Type}}, SchemaVersion: {{.Version}}},
			fn: handler.Typed(handler.DecodeOptions{ {{- if .AllowUnknown}}AllowUnknownFields: true{{end -}} }, func(ctx context.Context, m *handler.Msg, p {{.GoType}}) error {
				return h.Handle{{.Name}}(ctx, m, {{with $.Queries}}{{.Qual}}New(m.Tx), {{end}}p)
			}),
		},
{{- end}}
	})
}
{{end}}
{{- range .Events}}
// {{.Name}}Consumer is a consumer that declared {{.Type}} v{{.Version}} ({{.GoType}}):
// {{idents .Consumers}}.
type {{.Name}}Consumer interface {
	Name() string
	consumes{{.Name}}()
}

// {{.Name}}Message returns the message delivering p to consumer to, for
// callers that accept in batches. It rejects p if its Validate method fails.
func {{.Name}}Message(to {{.Name}}Consumer, d Delivery, p {{.GoType}}) (inbox.Message, error) {
	return inboxgenMessage(to, {{quote .Type}}, {{.Version}}, d, p)
}

// Accept{{.Name}} accepts {{.Type}} v{{.Version}} for consumer to: see
// inbox.Client.Accept.
func Accept{{.Name}}(ctx context.Context, c *inbox.Client, to {{.Name}}Consumer, d Delivery, p {{.GoType}}) (inbox.AcceptResult, error) {
	msg, err := {{.Name}}Message(to, d, p)
	if err != nil {
		return inbox.AcceptResult{}, err
	}
	return c.Accept(ctx, msg)
}

// Accept{{.Name}}Tx is Accept{{.Name}} inside the caller's transaction: see
// inbox.Client.AcceptTx.
func Accept{{.Name}}Tx(ctx context.Context, c *inbox.Client, tx pgx.Tx, to {{.Name}}Consumer, d Delivery, p {{.GoType}}) (inbox.AcceptResult, error) {
	msg, err := {{.Name}}Message(to, d, p)
	if err != nil {
		return inbox.AcceptResult{}, err
	}
	return c.AcceptTx(ctx, tx, msg)
}
{{end}}
// inboxgenMessage builds the message for p. It runs p's Validate method first,
// so an invalid event is rejected before anything is stored.
func inboxgenMessage[T any](to interface{ Name() string }, eventType string, version int, d Delivery, p T) (inbox.Message, error) {
	if to == nil {
		return inbox.Message{}, &inbox.ValidationError{Field: "consumer", Rule: inbox.RuleRequired, Detail: "pass one of the generated consumer values"}
	}
	if v, ok := any(&p).(handler.Validator); ok {
		if err := v.Validate(); err != nil {
			return inbox.Message{}, &inbox.ValidationError{Field: "payload", Rule: inbox.RuleValidate, Detail: err.Error()}
		}
	}
	return inbox.Message{
		Identity: inbox.Identity{
			Scope:     d.Scope,
			Source:    d.Source,
			Consumer:  to.Name(),
			MessageID: d.MessageID,
		},
		EventType:     eventType,
		SchemaVersion: version,
		Payload:       p,
		Metadata:      d.Metadata,
	}, nil
}

type inboxgenEntry struct {
	key handler.Key
	fn  handler.Func
}

// inboxgenRegister registers all entries or none, so a failed registration
// leaves the registry as it was.
func inboxgenRegister(reg *handler.Registry, consumer string, h any, entries []inboxgenEntry) error {
	if reg == nil || h == nil {
		return fmt.Errorf("pginbox: registering consumer %q: registry and handler are required", consumer)
	}
	for _, e := range entries {
		if _, dup := reg.Lookup(e.key); dup {
			return fmt.Errorf("pginbox: registering %s: %w", e.key, handler.ErrDuplicateHandler)
		}
	}
	for _, e := range entries {
		if err := reg.Register(e.key, e.fn); err != nil {
			return err
		}
	}
	return nil
}
`))
