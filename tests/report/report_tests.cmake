# The report's plots fit their canvas (tests/report/check_plot_texts.sh): a report of the committed results/ drawn by
# gnuplot passes, and the same plot with a planted over-long title must fail. Skipped (77) without gnuplot.
add_test(NAME report.plot_texts_fit
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/check_plot_texts.sh $<TARGET_FILE:spbench>
                 ${CMAKE_SOURCE_DIR}/report/paper/paper_tables.csv ${CMAKE_SOURCE_DIR}/results
                 ${CMAKE_CURRENT_BINARY_DIR}/report_texts)
set_tests_properties(report.plot_texts_fit PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION "REPORT_TEXTS_OK")
