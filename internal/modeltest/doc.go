// Package modeltest keeps the Quint model of the receipt protocol
// (model/receipts.qnt) and the code in step: every statement of queries/*.sql
// has the model action that stands for it, and every action of the model is
// either a statement or a named step around them (time, a crash, a handler's
// outcome, a hostile tenant).
package modeltest
