import ATSPolicy

extension PolicyStore.Snapshot {
    /// The policy of a loaded Info.plist: its ATS dictionary (`loaded.atsValue`, none = the empty
    /// dictionary) parsed with `parseOptions`, evaluated under `options`, and labelled with the
    /// source's summary and process name. The one place where `run`, the SIGHUP reload, `explain`
    /// and `diagnose` turn a loaded Info.plist into policy, so they can never disagree; the parsed
    /// dictionary is `evaluator.configuration` (its messages included). Pure and cheap: the
    /// decision cache starts empty.
    public init(loaded: LoadedInfoPlist, parseOptions: ParseOptions, options: EvaluationOptions) {
        let configuration = ATSConfigurationParser(options: parseOptions).parse(loaded.atsValue)
        self.init(
            evaluator: ATSEvaluator(configuration: configuration, options: options), sourceSummary: loaded.summary,
            processName: loaded.processName)
    }
}
