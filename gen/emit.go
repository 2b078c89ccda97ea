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
{{- if .Events}}
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/pginbox/pginbox/handler"
	"github.com/pginbox/pginbox/inbox"
{{- if .Emits}}
	"github.com/pginbox/pginbox/outbox"
{{- end}}
{{- with .Queries}}{{if not .Local}}

	{{importAlias .}}{{quote .Path}}
{{- end}}{{end}}
{{- else}}

	"github.com/pginbox/pginbox/outbox"
{{- end}}
)
{{- if .Events}}

// Delivery is one delivery of an event: its identity without the consumer,
// which the accept functions take as a typed value.
type Delivery = inbox.Delivery

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

// Register{{.Ident}} registers h for every event {{.Ident}} declared, all or
// none: see handler.Registry.RegisterAll.
func Register{{.Ident}}(reg *handler.Registry, h {{.Ident}}Handler) error {
	if h == nil {
		return fmt.Errorf("pginbox: registering consumer %q: %w: pass an implementation of {{.Ident}}Handler", {{quote .Name}}, handler.ErrNilHandler)
	}
	return reg.RegisterAll(
{{- range .Events}}
		handler.Entry{
			Key: handler.Key{Consumer: {{quote $c.Name}}, EventType: {{quote .Type}}, SchemaVersion: {{.Version}}},
			Func: handler.Typed(handler.DecodeOptions{ {{- if .AllowUnknown}}AllowUnknownFields: true{{end -}} }, func(ctx context.Context, m *handler.Msg, p {{.GoType}}) error {
				return h.Handle{{.Name}}(ctx, m, {{with $.Queries}}{{.Qual}}New(m.Tx), {{end}}p)
			}),
		},
{{- end}}
	)
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
// inbox.Client.AcceptBatch. It rejects p if its Validate method fails: see
// inbox.NewEventMessage.
func {{.Name}}Message(to {{.Name}}Consumer, d Delivery, p {{.GoType}}) (inbox.Message, error) {
{{- if .OrderingField}}
	msg, err := inbox.NewEventMessage(to, {{quote .Type}}, {{.Version}}, d, p)
	// Ordered by {{.OrderingField}}: see inbox.Message.OrderingKey.
	msg.OrderingKey = p.{{.OrderingField}}
	return msg, err
{{- else}}
	return inbox.NewEventMessage(to, {{quote .Type}}, {{.Version}}, d, p)
{{- end}}
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
{{- end}}
{{- range .Emits}}
// {{.Name}}Event returns the outbox event carrying p ({{.Type}} v{{.Version}}
// from {{quote .Source}} to {{quote .Destination}}). See outbox.NewEvent: a
// failing Validate method rejects p, and an OrderingKey method gives the key.
func {{.Name}}Event(p {{.GoType}}) (outbox.Event, error) {
	return outbox.NewEvent(outbox.Event{
		Type:          {{quote .Type}},
		SchemaVersion: {{.Version}},
		Source:        {{quote .Source}},
		Destination:   {{quote .Destination}},
	}, p)
}

// Emit{{.Name}} emits p in tx: it is published once tx commits. See
// outbox.Emit.
func Emit{{.Name}}(ctx context.Context, tx outbox.Tx, p {{.GoType}}) (outbox.ID, error) {
	ev, err := {{.Name}}Event(p)
	if err != nil {
		return outbox.ID{}, err
	}
	return outbox.Emit(ctx, tx, ev)
}
{{end}}
`))
