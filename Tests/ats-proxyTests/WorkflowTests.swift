import Foundation
import Testing
import Yams

/// The GitHub Actions workflows under `.github/workflows` cannot run here; their YAML is parsed with Yams and
/// the keys GitHub needs are checked, so a broken indentation or a missing key fails `make test`.
@Suite struct WorkflowTests {
    static let workflows = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".github/workflows")

    /// The workflow's top-level mapping, parsed by Yams (a YAML error fails the test with Yams's message).
    static func load(_ name: String) throws -> Node.Mapping {
        let text = try String(contentsOf: workflows.appendingPathComponent(name), encoding: .utf8)
        let node = try #require(try Yams.compose(yaml: text), "\(name) is empty")
        return try #require(node.mapping, "\(name): the top level is not a mapping")
    }

    /// The jobs of a workflow, each checked for `runs-on` and a non-empty list of steps that each `run` or `uses`.
    static func jobs(_ workflow: Node.Mapping, _ name: String) throws -> [String: Node.Mapping] {
        #expect(workflow["name"]?.string != nil, "\(name): no name")
        #expect(workflow["on"] != nil, "\(name): no 'on' (no trigger)")
        let jobs = try #require(workflow["jobs"]?.mapping, "\(name): no jobs mapping")
        var result: [String: Node.Mapping] = [:]
        for (key, value) in jobs {
            let id = try #require(key.string)
            let job = try #require(value.mapping, "\(name): job \(id) is not a mapping")
            #expect(job["runs-on"]?.string?.isEmpty == false, "\(name): job \(id) has no runs-on")
            let steps = try #require(job["steps"]?.sequence, "\(name): job \(id) has no steps list")
            #expect(!steps.isEmpty, "\(name): job \(id) has no steps")
            for step in steps {
                let mapping = try #require(step.mapping, "\(name): a step of \(id) is not a mapping")
                #expect(
                    mapping["run"] != nil || mapping["uses"] != nil, "\(name): a step of \(id) neither runs nor uses")
            }
            result[id] = job
        }
        return result
    }

    /// Every `run:` script of a job, joined.
    static func scripts(_ job: Node.Mapping) -> String {
        (job["steps"]?.sequence.map { Array($0) } ?? []).compactMap { $0.mapping?["run"]?.string }.joined(
            separator: "\n")
    }

    @Test func ciRunsDotCIRunAndThePackageCheckOnLinuxAndBuildsTestsAndSmokesOnMacOS() throws {
        let jobs = try Self.jobs(try Self.load("ci.yml"), "ci.yml")
        #expect(Set(jobs.keys) == ["linux", "package", "macos"])
        let linux = try #require(jobs["linux"])
        #expect(Self.scripts(linux).contains(".ci/run"))
        let package = try #require(jobs["package"])
        #expect(Self.scripts(package).contains("scripts/package --test"))
        let macos = try #require(jobs["macos"])
        #expect(macos["runs-on"]?.string?.hasPrefix("macos-") == true)
        let script = Self.scripts(macos)
        #expect(script.contains("swift build --build-tests"))
        #expect(script.contains("swift test --skip-build"))
        #expect(script.contains("SystemToolsCLITests"))
        #expect(script.contains("curl") && script.contains("X-ATS-Error"))
    }

    @Test func releaseOnATagAttachesTheArchiveAndTheDeb() throws {
        let workflow = try Self.load("release.yml")
        let tags = workflow["on"]?.mapping?["push"]?.mapping?["tags"]?.sequence?.compactMap(\.string)
        #expect(tags == ["v*"])
        let jobs = try Self.jobs(workflow, "release.yml")
        let job = try #require(jobs.values.first)
        #expect(Self.scripts(job).contains("scripts/package"))
        let attach = (job["steps"]?.sequence.map { Array($0) } ?? []).compactMap(\.mapping).first {
            $0["uses"]?.string?.hasPrefix("softprops/action-gh-release") == true
        }
        let files = try #require(attach?["with"]?.mapping?["files"]?.string)
        #expect(files.contains("dist/*.tar.gz") && files.contains("dist/*.deb"))
    }

    @Test func aBrokenWorkflowIsReportedByTheParser() {
        // The check above relies on Yams rejecting malformed YAML rather than reading it some other way.
        #expect(throws: (any Error).self) { try Yams.compose(yaml: "jobs:\n  linux:\n    steps: [\n") }
    }
}
