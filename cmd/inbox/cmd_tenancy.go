package main

// tenancyCmd is `inbox tenancy <subcommand>`: row-level security on pginbox's
// tables and the roles that work under it. Like outbox, each subcommand is a
// command of its own, named "tenancy NAME".
var tenancyCmd = &command{
	Name:    "tenancy",
	Args:    "status|grant|enable|disable [arguments] [flags]",
	Summary: "row-level security on pginbox's tables: status, enable, disable, grant a role",
	Help: `
With tenancy enabled, PostgreSQL itself keeps each tenant's receipts, work,
audit rows and outbox events apart: a role without BYPASSRLS sees and writes
only the scope its transaction set (pginbox sets it wherever it opens one).
The order: ` + "`inbox migrate up`" + `, create the roles, ` + "`inbox tenancy grant`" + ` each one,
` + "`inbox tenancy enable`" + `. See docs/TENANCY.md.

Run ` + "`inbox help tenancy <subcommand>`" + ` for a subcommand's flags.`,
}

// tenancyGroup holds the subcommands, in the order a new user meets them.
var tenancyGroup = newCommandGroup(tenancyCmd, "status", "grant", "enable", "disable")
