package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/sluicehq/sluice/app/api"
	"github.com/sluicehq/sluice/engine"
)

// readPassword reads one line from stdin (for --password-stdin).
func readPassword(in io.Reader) (string, error) {
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", usagef("--password-stdin: no password on standard input")
	}
	return pw, nil
}

func newUserCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage accounts, API tokens and sign-in links",
		Long: `Accounts own jobs: a user sees only their own work, an admin sees everything.
'local' (id 1) is the admin that owns what the CLI submits.`,
	}
	cmd.AddCommand(newUserAddCmd(g), newUserListCmd(g), newUserPasswdCmd(g), newUserTokenCmd(g),
		newUserTokensCmd(g), newUserRevokeCmd(g), newUserSignInCmd(g))
	for _, c := range cmd.Commands() {
		c.SilenceUsage = true
	}
	return cmd
}

var stdin io.Reader = os.Stdin

func newUserAddCmd(g *globals) *cobra.Command {
	var admin, pwStdin, asJSON bool
	cmd := &cobra.Command{
		Use:   "add NAME",
		Short: "Create an account and print its first API token",
		Long: `Create an account and print a new API token for it (shown once: keep it).
With --password-stdin the first line of standard input becomes the account's
password, for signing in from a browser (at least 8 characters).`,
		Example: `  sluice user add ana
  echo 'correct horse battery' | sluice user add admin --admin --password-stdin
  sluice user add bot --json`,
		Args: exactArgs(1, "one NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var pw string
			if pwStdin {
				var err error
				if pw, err = readPassword(stdin); err != nil {
					return err
				}
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				u, token, err := api.CreateUser(ctx, env.Store, args[0], admin, pw, time.Now())
				if err != nil {
					return err
				}
				auditCLI(ctx, env, "user.create", "user "+u.Name, u.Role)
				if asJSON {
					return writeJSONCompact(g.stdout, map[string]any{"user": u, "token": token})
				}
				fmt.Fprintf(g.stdout, "user %s (%s, id %d) created\napi token (shown once): %s\n", u.Name, u.Role, u.ID, token)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "the account is an admin (sees and manages everything)")
	cmd.Flags().BoolVar(&pwStdin, "password-stdin", false, "read a password from the first line of standard input")
	cmd.Flags().BoolVar(&asJSON, "json", false, `print {"user":...,"token":...}`)
	return cmd
}

func newUserListCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List accounts",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				users, err := env.Store.ListUsers(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, users)
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "ID\tNAME\tROLE\tPASSWORD\tCREATED")
				for _, u := range users {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%s\n", u.ID, u.Name, u.Role, u.HasPassword, shortTime(u.CreatedAt))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newUserPasswdCmd(g *globals) *cobra.Command {
	var clear bool
	cmd := &cobra.Command{
		Use:     "passwd NAME",
		Short:   "Set an account's password from the first line of standard input",
		Example: "  echo 'correct horse battery' | sluice user passwd local",
		Args:    exactArgs(1, "one NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var hash string
			if !clear {
				pw, err := readPassword(stdin)
				if err != nil {
					return err
				}
				if hash, err = api.HashPassword(pw); err != nil {
					return err
				}
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				u, err := env.Store.GetUserByName(ctx, args[0])
				if err != nil {
					return err
				}
				if err := env.Store.SetPassword(ctx, &engine.SetPasswordParams{UserID: u.ID, PasswordHash: hash}); err != nil {
					return err
				}
				auditCLI(ctx, env, "user.password", "user "+u.Name, map[bool]string{true: "removed", false: "set"}[clear])
				fmt.Fprintf(g.stdout, "password of %s %s\n", u.Name, map[bool]string{true: "removed", false: "set"}[clear])
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&clear, "clear", false, "remove the password instead (no browser sign-in)")
	return cmd
}

func newUserTokenCmd(g *globals) *cobra.Command {
	var name string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "token NAME",
		Short: "Create another API token for an account",
		Args:  exactArgs(1, "one account NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				u, err := env.Store.GetUserByName(ctx, args[0])
				if err != nil {
					return err
				}
				tok, secret, err := api.CreateAPIToken(ctx, env.Store, u.ID, name, time.Now())
				if err != nil {
					return err
				}
				auditCLI(ctx, env, "token.create", fmt.Sprintf("token %d", tok.ID), name)
				if asJSON {
					return writeJSONCompact(g.stdout, map[string]any{"user": u.Name, "tokenId": tok.ID, "token": secret})
				}
				fmt.Fprintf(g.stdout, "token %d for %s (shown once): %s\n", tok.ID, u.Name, secret)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&name, "name", "created with sluice user token", "what the token is for")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newUserTokensCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "tokens [NAME]",
		Short: "List API tokens (of one account, or all); never their secrets",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				p := &engine.ListTokensParams{Kind: engine.TokenAPI}
				if len(args) == 1 {
					u, err := env.Store.GetUserByName(ctx, args[0])
					if err != nil {
						return err
					}
					p.UserID = u.ID
				}
				toks, err := env.Store.ListTokens(ctx, p)
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, toks)
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "ID\tUSER\tNAME\tCREATED\tLAST USED")
				for _, t := range toks {
					used := "-"
					if t.LastUsedAt != nil {
						used = shortTime(*t.LastUsedAt)
					}
					fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\n", t.ID, t.UserID, t.Name, shortTime(t.CreatedAt), used)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newUserRevokeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "revoke TOKEN_ID",
		Short: "Revoke an API token (it stops working at once)",
		Args:  exactArgs(1, "one TOKEN_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0], "token ID")
			if err != nil {
				return err
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if err := env.Store.DeleteToken(ctx, &engine.DeleteTokenParams{ID: id}); err != nil {
					return err
				}
				auditCLI(ctx, env, "token.revoke", fmt.Sprintf("token %d", id), "")
				fmt.Fprintf(g.stdout, "token %d revoked\n", id)
				return nil
			})
		},
	}
}

func newUserSignInCmd(g *globals) *cobra.Command {
	var base string
	cmd := &cobra.Command{
		Use:   "signin-link [NAME]",
		Short: "Print a one-time browser sign-in link for an account (default local)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := "local"
			if len(args) == 1 {
				name = args[0]
			}
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				u, err := env.Store.GetUserByName(ctx, name)
				if err != nil {
					return err
				}
				link, err := api.CreateSignInLink(ctx, env.Store, u.ID, strings.TrimRight(base, "/"), time.Now())
				if err != nil {
					return err
				}
				auditCLI(ctx, env, "signin.link", "user "+u.Name, "")
				fmt.Fprintf(g.stdout, "%s\n(works once, for %s)\n", link, api.SignInLinkTTL)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&base, "url", "http://"+envOr("SLUICE_ADDR", "127.0.0.1:8080"), "the server's address as a browser reaches it")
	return cmd
}

// auditCLI records an action taken on this machine's CLI (as the local
// account); a failure is logged only.
func auditCLI(ctx context.Context, env *Env, action, object, detail string) {
	host, _ := os.Hostname()
	if _, err := env.Store.RecordAudit(ctx, &engine.AuditEntry{At: time.Now(), UserID: 1, UserName: "local (cli)", Action: action,
		Object: object, IP: "cli@" + host, Detail: detail}); err != nil {
		env.Log.Warn("writing the audit trail failed", "err", err)
	}
}

func newAuditCmd(g *globals) *cobra.Command {
	var asJSON bool
	var limit int
	var before int64
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Show who did what, from where (newest first)",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				list, err := env.Store.ListAudit(ctx, &engine.ListAuditParams{Before: before, Limit: limit})
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, list)
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "ID\tAT\tUSER\tACTION\tOBJECT\tFROM\tDETAIL")
				for _, e := range list {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", e.ID, shortTime(e.At), e.UserName, e.Action, e.Object, e.IP, e.Detail)
				}
				if len(list) == limit {
					fmt.Fprintf(tw, "(more: --before %s)\n", strconv.FormatInt(list[len(list)-1].ID, 10))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many entries")
	cmd.Flags().Int64Var(&before, "before", 0, "continue a listing: entries with ids below this")
	return cmd
}
