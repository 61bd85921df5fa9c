// Package layout holds no code: its test enforces the import rule of the
// README's Layout section on every package of the module.
package layout
