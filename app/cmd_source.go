package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sluicehq/sluice/adapters/folder"
	"github.com/sluicehq/sluice/adapters/ftp"
	"github.com/sluicehq/sluice/adapters/remote"
	"github.com/sluicehq/sluice/adapters/s3"
	"github.com/sluicehq/sluice/engine"
)

func newSourcesCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "sources",
		Short: "List the ingest sources (watched folders, FTP folders, S3 prefixes) and how they fare",
		Long: `List the ingest sources: where files arrive, the pipeline their jobs run, what
is done with a file once ingested, when the source last looked, its last error
and how many files it ingested or could not ingest. Sources run inside
'sluice --serve' and 'sluice worker'; add them with 'sluice source add'.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				srcs, err := env.Store.ListSources(ctx)
				if err != nil {
					return err
				}
				if asJSON {
					if srcs == nil {
						srcs = []*engine.SourceRecord{}
					}
					return writeJSON(g.stdout, srcs)
				}
				if len(srcs) == 0 {
					fmt.Fprintln(g.stdout, "no sources (add one with: sluice source add folder NAME --path DIR --pipeline P)")
					return nil
				}
				tw := table(g.stdout)
				fmt.Fprintln(tw, "NAME\tKIND\tWHERE\tPIPELINE\tAFTER\tPOLL\tINGESTED\tFAILED\tLAST POLL\tLAST ERROR")
				for _, s := range srcs {
					where, last := sourceWhere(s), "-"
					if s.LastPollAt != nil {
						last = shortTime(*s.LastPollAt)
					}
					name := s.Name
					if !s.Enabled {
						name += " (disabled)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\n", name, s.Kind, where, s.Pipeline, s.After,
						s.Poll, s.Ingested, s.Failed, last, oneLine(s.LastError))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func newSourceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "source",
		Short: "Add, remove or scan an ingest source (see 'sluice sources')",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSourceAddCmd(g), newSourceRmCmd(g), newSourceScanCmd(g))
	return cmd
}

func newSourceAddCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "add folder|ftp|s3 NAME ...",
		Short: "Add an ingest source: a watched folder, an FTP folder or an S3 prefix",
		Long: `Add an ingest source. Every CSV or XLSX file that arrives in it becomes one
job on the source's pipeline, exactly once, by the same rule for every kind: a
file is taken when it has not changed (size, time, ETag) for the stability
window (--min-age) across two looks; names of files still being written
(*.part, *.partial, *.tmp, *.crdownload, ~$*, dotfiles, and --ignore globs)
are never taken. Sources run inside 'sluice --serve' and 'sluice worker'.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("source kind %q: want folder, ftp or s3", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newSourceAddFolderCmd(g), newSourceAddFTPCmd(g), newSourceAddS3Cmd(g))
	return cmd
}

// sourceAdd holds the flags every kind of source has and stores the source.
type sourceAdd struct {
	pipeline, after string
	poll, minAge    time.Duration
	ignore          []string
	reingest        bool
}

func (a *sourceAdd) flags(f *pflag.FlagSet, poll time.Duration, pollHelp string) {
	f.StringVar(&a.pipeline, "pipeline", "", "the pipeline of the jobs")
	f.StringVar(&a.after, "after", engine.AfterMove, "after ingest: move (to done/ or failed/), delete or leave")
	f.DurationVar(&a.poll, "poll", poll, pollHelp)
	f.DurationVar(&a.minAge, "min-age", engine.DefaultMinAge, "stability window: a file unchanged this long is taken")
	f.StringSliceVar(&a.ignore, "ignore", nil, "more name globs to ignore (repeatable)")
	f.BoolVar(&a.reingest, "reingest-changed", false, "a file changed after its ingest becomes a new job")
}

// rule is the arrival rule of the flags.
func (a *sourceAdd) rule() engine.ArrivalRule {
	return engine.ArrivalRule{MinAgeMS: a.minAge.Milliseconds(), Ignore: a.ignore, ReingestChanged: a.reingest}
}

// check checks the common flags before anything is opened.
func (a *sourceAdd) check() error {
	if a.pipeline == "" {
		return usagef("--pipeline: required")
	}
	act, err := engine.ParseAfter(a.after)
	if err != nil {
		return usagef("--after: %s", engine.ErrorMessage(err))
	}
	a.after = act
	if a.poll < time.Second {
		return usagef("--poll: %s is below 1s", a.poll)
	}
	if err := a.rule().Validate(); err != nil {
		return usagef("--ignore: %s", engine.ErrorMessage(err))
	}
	return nil
}

// create stores the source, its config validated by validate (a usage
// error, since it is made of flags).
func (a *sourceAdd) create(g *globals, cmd *cobra.Command, name, kind string, cfg interface{ Validate() error }, where string) error {
	if err := cfg.Validate(); err != nil {
		return usagef("%s", engine.ErrorMessage(err))
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
		if _, err := env.Store.GetPipeline(ctx, a.pipeline); engine.IsNotFound(err) {
			return usagef("--pipeline: %q does not exist (see 'sluice pipelines')", a.pipeline)
		} else if err != nil {
			return err
		}
		src, err := env.Store.CreateSource(ctx, &engine.SourceRecord{Name: name, Kind: kind, Config: raw,
			Pipeline: a.pipeline, After: a.after, Poll: a.poll, Enabled: true}, time.Now())
		if err != nil {
			return err
		}
		fmt.Fprintf(g.stdout, "source %s added: %s → pipeline %s (after: %s, look every %s)\n", src.Name, where, src.Pipeline, src.After, src.Poll)
		return nil
	})
}

func newSourceAddFolderCmd(g *globals) *cobra.Command {
	var a sourceAdd
	var dir string
	var recursive bool
	cmd := &cobra.Command{
		Use:   "folder NAME --path DIR --pipeline P",
		Short: "Add a watched folder: files dropped into it become jobs",
		Long: `Add a watched folder. Every CSV or XLSX file that arrives in DIR becomes one
job on the pipeline, exactly once: a file is taken when it has not changed for
the stability window (--min-age) across two looks; names of files still being
written (*.part, *.partial, *.tmp, *.crdownload, ~$*, dotfiles, and --ignore
globs) are never taken; symbolic links are never followed.

After ingest a file is moved to DIR/done/ (--after move, the default; a file
that could not be ingested goes to DIR/failed/), deleted (--after delete;
failed files still go to failed/) or left in place (--after leave). A file
that changes after it was ingested is left alone unless --reingest-changed.

The folder is watched by 'sluice --serve' and 'sluice worker' (file events,
and a rescan every --poll as a safety net); 'sluice source scan NAME' looks
once, now.`,
		Example: `  sluice source add folder inbox --path ./inbox --pipeline noop
  sluice source add folder orders --path /srv/drop --pipeline enrich --after leave --poll 30s --recursive`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dir == "" {
				return usagef("--path: required")
			}
			if err := a.check(); err != nil {
				return err
			}
			abs, err := filepath.Abs(dir)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
				return usagef("--path: %s is not a folder", dir)
			}
			return a.create(g, cmd, args[0], engine.SourceFolder, &folder.Config{Path: abs, Recursive: recursive, ArrivalRule: a.rule()}, abs)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "path", "", "the folder to watch")
	f.BoolVar(&recursive, "recursive", false, "watch subfolders too")
	a.flags(f, folder.DefaultPoll, "rescan period (file events are the fast path)")
	return cmd
}

// secretFlags are the two ways to name a secret on the command line.
func secretFlag(env, file string, what string) (remote.Secret, error) {
	if env != "" && file != "" {
		return remote.Secret{}, usagef("%s: give the environment variable or the file, not both", what)
	}
	if file == "" {
		return remote.Secret{Env: env}, nil
	}
	abs, err := filepath.Abs(file)
	if err != nil {
		return remote.Secret{}, err
	}
	s := remote.Secret{File: abs}
	// Read once here so a wrong mode is seen now, not at the first poll.
	if _, err := s.Read(what); err != nil {
		return remote.Secret{}, usagef("%s", engine.ErrorMessage(err))
	}
	return s, nil
}

// warnUnset notes a named variable this shell does not have: the process
// that runs the source (--serve, worker) must have it.
func warnUnset(g *globals, s remote.Secret) {
	if s.Env != "" && os.Getenv(s.Env) == "" {
		fmt.Fprintf(g.stderr, "note: %s is not set here; set it for 'sluice --serve' or 'sluice worker', which read it at every connection\n", s.Env)
	}
}

func newSourceAddFTPCmd(g *globals) *cobra.Command {
	var a sourceAdd
	var rawURL, passEnv, passFile string
	var insecure bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "ftp NAME --url ftp://USER@HOST:PORT/DIR --password-env VAR --pipeline P",
		Short: "Add an FTP folder, polled: files uploaded to it become jobs",
		Long: `Add an FTP folder. The server is polled every --poll: the folder is listed
(MLSD where the server offers it, LIST otherwise; "." and ".." and links are
left out; subfolders are not entered), and every file that is stable across two
looks (--min-age) is downloaded (passive mode) to a temporary copy, checked
against the listed size, and becomes one job, exactly once, across restarts and
across processes polling the same server.

The password is never stored: --password-env names an environment variable
of the process that runs the source ('sluice --serve', 'sluice worker'), or
--password-file names a file of mode 0600 whose first line is the password.
Neither: anonymous login. ftps:// in the URL uses explicit FTPS (AUTH TLS).

After ingest a file is moved to DIR/done/ on the server (--after move; a file
that could not be ingested goes to DIR/failed/), deleted, or left there. A
server that is down, slow or answers garbage is an error on the source ('sluice
sources', the Sources page) and is tried again with a growing backoff; a
download cut short is not ingested and is tried again (after a minute).`,
		Example: `  FTP_PASS=... sluice source add ftp partner --url ftp://sluice@ftp.example.com:21/outgoing --password-env FTP_PASS --pipeline noop
  sluice source add ftp lab --url ftps://lab@10.0.0.5/drop --password-file /etc/sluice/lab.pw --pipeline enrich --after leave --poll 1m`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if rawURL == "" {
				return usagef("--url: required (ftp://USER@HOST:PORT/DIR)")
			}
			if err := a.check(); err != nil {
				return err
			}
			pw, err := secretFlag(passEnv, passFile, "--password-file")
			if err != nil {
				return err
			}
			cfg := &ftp.Config{URL: rawURL, Password: pw, InsecureSkipVerify: insecure, TimeoutMS: timeout.Milliseconds(), ArrivalRule: a.rule()}
			if err := a.create(g, cmd, args[0], engine.SourceFTP, cfg, cfg.Where()); err != nil {
				return err
			}
			warnUnset(g, pw)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&rawURL, "url", "", "ftp://USER@HOST[:PORT]/DIR (ftps:// for explicit FTPS); no password in it")
	f.StringVar(&passEnv, "password-env", "", "the environment variable that holds the password")
	f.StringVar(&passFile, "password-file", "", "a file of mode 0600 whose first line is the password")
	f.BoolVar(&insecure, "insecure-skip-verify", false, "FTPS: accept any certificate")
	f.DurationVar(&timeout, "timeout", ftp.DefaultTimeout, "give up on a server silent this long")
	a.flags(f, remote.DefaultPoll, "polling period")
	return cmd
}

func newSourceAddS3Cmd(g *globals) *cobra.Command {
	var a sourceAdd
	var cfg s3.Config
	var akEnv, skEnv, akFile, skFile string
	cmd := &cobra.Command{
		Use:   "s3 NAME --bucket B [--prefix P] [--endpoint URL --path-style] [--access-key-env VAR --secret-key-env VAR] --pipeline P",
		Short: "Add an S3 prefix, polled: objects put under it become jobs",
		Long: `Add an S3 bucket prefix (AWS, or any S3-compatible server with --endpoint and,
mostly, --path-style). The prefix is listed every --poll, a page of 1,000 keys
at a time (memory does not grow with the bucket; --recursive takes keys under
sub-prefixes too); every object stable across two looks (size, time and ETag,
--min-age) is streamed to a temporary copy, pinned to the listed ETag, checked
against its size and the server's checksum when one is sent, and becomes one
job, exactly once, across restarts and processes.

Keys are never stored: --access-key-env and --secret-key-env name environment
variables of the process that runs the source, or --access-key-file and
--secret-key-file name files of mode 0600. Neither: the SDK's default chain
(AWS_ACCESS_KEY_ID..., shared config files, instance roles).

After ingest an object is moved under PREFIX/done/ (--after move; one that
could not be ingested under PREFIX/failed/), deleted, or left.`,
		Example: `  sluice source add s3 drops --bucket acme-in --prefix orders/ --pipeline noop
  sluice source add s3 local --bucket in --endpoint http://127.0.0.1:7070 --path-style \
      --access-key-env S3_KEY --secret-key-env S3_SECRET --pipeline enrich --after delete --poll 15s`,
		Args: exactArgs(1, "NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Bucket == "" {
				return usagef("--bucket: required")
			}
			if err := a.check(); err != nil {
				return err
			}
			var err error
			if cfg.AccessKey, err = secretFlag(akEnv, akFile, "--access-key-file"); err != nil {
				return err
			}
			if cfg.SecretKey, err = secretFlag(skEnv, skFile, "--secret-key-file"); err != nil {
				return err
			}
			cfg.ArrivalRule = a.rule()
			if err := a.create(g, cmd, args[0], engine.SourceS3, &cfg, cfg.Where()); err != nil {
				return err
			}
			warnUnset(g, cfg.AccessKey)
			warnUnset(g, cfg.SecretKey)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Bucket, "bucket", "", "the bucket")
	f.StringVar(&cfg.Prefix, "prefix", "", `the "folder" of the objects (a final / is added)`)
	f.StringVar(&cfg.Endpoint, "endpoint", "", "an S3-compatible server's URL (default: AWS)")
	f.BoolVar(&cfg.PathStyle, "path-style", false, "address the bucket in the path (most S3-compatible servers)")
	f.StringVar(&cfg.Region, "region", "", "signing region (default: from the environment, else "+s3.DefaultRegion+")")
	f.BoolVar(&cfg.Recursive, "recursive", false, "take objects under sub-prefixes too")
	f.StringVar(&akEnv, "access-key-env", "", "the environment variable that holds the access key id")
	f.StringVar(&skEnv, "secret-key-env", "", "the environment variable that holds the secret key")
	f.StringVar(&akFile, "access-key-file", "", "a file of mode 0600 that holds the access key id")
	f.StringVar(&skFile, "secret-key-file", "", "a file of mode 0600 that holds the secret key")
	a.flags(f, remote.DefaultPoll, "polling period")
	return cmd
}

func newSourceRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a source and its ledger (its jobs are kept; its folder is not touched)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				if err := env.Store.DeleteSource(ctx, args[0]); err != nil {
					return err
				}
				fmt.Fprintf(g.stdout, "source %s removed\n", args[0])
				return nil
			})
		},
	}
}

func newSourceScanCmd(g *globals) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "scan NAME",
		Short: "Look at a source now and ingest every stable file (also while servers watch it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withEnv(cmd, func(ctx context.Context, env *Env) error {
				ing, err := env.Ingester()
				if err != nil {
					return err
				}
				res, err := env.scanSource(ctx, ing, args[0])
				if err != nil {
					return err
				}
				if asJSON {
					return writeJSON(g.stdout, res)
				}
				fmt.Fprintf(g.stdout, "source %s: %d files seen, %d ingested, %d failed\n", args[0], res.Seen, res.Ingested, res.Failed)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
