# Homebrew formula for ats-proxy: builds from source with the Swift toolchain of Xcode, against Homebrew's
# openssl@3 and libnghttp2, and installs the completions and the man page the binary generates.
# NOT RUN HERE: it was written without a Mac or Homebrew at hand (docs/INSTALL.md says so). Before publishing
# it in a tap, point `url` at the release tarball and fill in its sha256 (`brew fetch --build-from-source`
# prints it), then `brew install --build-from-source ./ats-proxy.rb && brew test ats-proxy && brew audit --strict`.
class AtsProxy < Formula
  desc "HTTP proxy that enforces an app's App Transport Security policy like iOS and macOS"
  homepage "https://github.com/ats-proxy/ats-proxy"
  url "https://github.com/ats-proxy/ats-proxy/archive/refs/tags/v0.1.0.tar.gz"
  sha256 "0000000000000000000000000000000000000000000000000000000000000000"
  head "https://github.com/ats-proxy/ats-proxy.git", branch: "main"

  depends_on xcode: ["16.3", :build]
  depends_on "pkgconf" => :build
  depends_on "libnghttp2"
  depends_on "openssl@3"

  uses_from_macos "swift" => :build

  def install
    # Compiled into `ats-proxy --version` (Package.swift reads them; see scripts/version).
    ENV["ATS_PROXY_BUILD_VERSION"] = version.to_s
    ENV["ATS_PROXY_BUILD_COMMIT"] = Utils.git_head if build.head?
    system "swift", "build", "--disable-sandbox", "--configuration", "release", "--product", "ats-proxy"
    bin.install ".build/release/ats-proxy"

    # bash, zsh and fish completions: `ats-proxy --generate-completion-script SHELL` (ArgumentParser).
    generate_completions_from_executable(bin/"ats-proxy", "--generate-completion-script")

    # The man page, from the command definitions (swift-argument-parser's generate-manual tool).
    ENV["SWIFT_BUILD_FLAGS"] = "--disable-sandbox"
    system "scripts/manual", bin/"ats-proxy", buildpath/"manual"
    man1.install buildpath/"manual/ats-proxy.1"

    doc.install "README.md", Dir["docs/*"]
  end

  test do
    version_report = shell_output("#{bin}/ats-proxy --version")
    assert_match "ats-proxy #{version}", version_report
    assert_match "OpenSSL: OpenSSL 3.", version_report

    # Full ATS blocks a cleartext load: explain exits 1 and names the error and the fix.
    explained = shell_output("#{bin}/ats-proxy explain http://example.com/", 1)
    assert_match "NSURLErrorDomain -1022", explained
    assert_match "NSExceptionAllowsInsecureHTTPLoads", explained
  end
end
