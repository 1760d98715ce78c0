package testgit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHServer serves a Root's repositories to git over SSH: it runs
// git-upload-pack for exec requests from the one authorised client key.
type SSHServer struct {
	// Addr is host:port of the server on 127.0.0.1.
	Addr string
	// KnownHosts is the known_hosts line for the server's host key.
	KnownHosts string
	// ClientKeyPEM is the OpenSSH PEM private key the server accepts.
	ClientKeyPEM []byte
	// HostKey is the server's public host key.
	HostKey ssh.PublicKey

	root     string
	listener net.Listener
	config   *ssh.ServerConfig
	wg       sync.WaitGroup
}

// RepoURL is the ssh:// clone URL of repository name, as user git.
func (s *SSHServer) RepoURL(name string) string {
	return "ssh://git@" + s.Addr + "/" + name
}

// ServeSSH starts an SSH server for the root's repositories on 127.0.0.1,
// with a fresh host key and a fresh authorised client key, stopped when
// the test ends.
func (r *Root) ServeSSH() *SSHServer {
	r.t.Helper()
	hostSigner, _, err := newEd25519Signer()
	if err != nil {
		r.t.Fatalf("generating ssh host key: %v", err)
	}
	clientSigner, clientPEM, err := newEd25519Signer()
	if err != nil {
		r.t.Fatalf("generating ssh client key: %v", err)
	}
	authorized := clientSigner.PublicKey().Marshal()

	config := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), authorized) {
				return nil, nil
			}
			return nil, errors.New("unknown public key")
		},
	}
	config.AddHostKey(hostSigner)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatalf("listening on loopback: %v", err)
	}
	s := &SSHServer{
		Addr:         ln.Addr().String(),
		ClientKeyPEM: clientPEM,
		HostKey:      hostSigner.PublicKey(),
		root:         r.Dir,
		listener:     ln,
		config:       config,
	}
	s.KnownHosts = knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey)
	s.wg.Add(1)
	go s.serve()
	r.t.Cleanup(s.Close)
	return s
}

// Close stops accepting connections and waits for the accept loop.
func (s *SSHServer) Close() {
	_ = s.listener.Close()
	s.wg.Wait()
}

// NewClientKeyPEM returns a new OpenSSH PEM private key, one the server
// does not accept.
func NewClientKeyPEM() ([]byte, error) {
	_, pemBytes, err := newEd25519Signer()
	return pemBytes, err
}

func newEd25519Signer() (ssh.Signer, []byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		return nil, nil, err
	}
	return signer, pem.EncodeToMemory(block), nil
}

func (s *SSHServer) serve() {
	defer s.wg.Done()
	for {
		conn, err := s.listener.Accept()
		if err != nil {
			return
		}
		go s.handleConn(conn)
	}
}

func (s *SSHServer) handleConn(nc net.Conn) {
	defer nc.Close()
	_, chans, reqs, err := ssh.NewServerConn(nc, s.config)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nch := range chans {
		if nch.ChannelType() != "session" {
			_ = nch.Reject(ssh.UnknownChannelType, "only session channels")
			continue
		}
		ch, requests, err := nch.Accept()
		if err != nil {
			return
		}
		go s.handleSession(ch, requests)
	}
}

func (s *SSHServer) handleSession(ch ssh.Channel, requests <-chan *ssh.Request) {
	defer ch.Close()
	for req := range requests {
		if req.Type != "exec" {
			// env and pty requests are not needed by git; refuse them.
			if req.WantReply {
				_ = req.Reply(false, nil)
			}
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			continue
		}
		dir, err := s.repoDir(payload.Command)
		if err != nil {
			_ = req.Reply(true, nil)
			fmt.Fprintf(ch.Stderr(), "fatal: %v\n", err)
			sendExitStatus(ch, 128)
			return
		}
		_ = req.Reply(true, nil)
		sendExitStatus(ch, runUploadPack(ch, dir))
		return
	}
}

// repoDir parses "git-upload-pack '/name'" and maps name into the root.
func (s *SSHServer) repoDir(command string) (string, error) {
	verb, arg, ok := strings.Cut(command, " ")
	if !ok || (verb != "git-upload-pack" && verb != "git upload-pack") {
		return "", fmt.Errorf("unsupported command %q: only git-upload-pack is served", command)
	}
	name := strings.Trim(strings.TrimSpace(arg), "'")
	clean := path.Clean("/" + name)
	return filepath.Join(s.root, filepath.FromSlash(clean)), nil
}

func runUploadPack(ch ssh.Channel, dir string) uint32 {
	cmd := exec.Command("git", "upload-pack", dir)
	cmd.Env = gitEnv()
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	// Feed stdin ourselves: with cmd.Stdin = ch, Wait would block until the
	// client closes its side, which it only does after the exit status.
	stdin, err := cmd.StdinPipe()
	if err == nil {
		err = cmd.Start()
	}
	if err == nil {
		go func() {
			_, _ = io.Copy(stdin, ch)
			_ = stdin.Close()
		}()
		err = cmd.Wait()
	}
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return uint32(exit.ExitCode())
		}
		fmt.Fprintf(ch.Stderr(), "fatal: running git upload-pack: %v\n", err)
		return 128
	}
	return 0
}

func sendExitStatus(ch ssh.Channel, status uint32) {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], status)
	_, _ = ch.SendRequest("exit-status", false, b[:])
	// Like sshd: EOF and exit status, then the caller closes the channel
	// without waiting for the client, which may itself be waiting for us.
	_ = ch.CloseWrite()
}
